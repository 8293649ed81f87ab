"""The Starlark engine: compile once per content hash, call with a deadline.

This is the only module that executes ``starlark`` (``runtime/static.py`` parses it for
``harness validate``). Built-in families (``runtime/builtins/*``) are plain Python
functions taking a :class:`CallContext` first; the engine exposes them to scripts as
struct values (``fs.read(...)``) and binds the context of the call in flight through
a context variable, so one compiled, frozen module serves every call.
"""

from __future__ import annotations

import contextvars
import importlib
import re
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import starlark as sl

from harness import surface
from harness.errors import BuiltinError
from harness.hotpath import tuple_maker
from harness.runtime import crossing, nesting, prewarm
from harness.runtime.builtins.calls import rename_calls
from harness.runtime.cancel import CANCELLED
from harness.runtime.context import CallContext, Outcome
from harness.runtime.reach import NOARGS_ENTRY, UNUSED, noargs_source
from harness.runtime.when import when_source

MAX_CALLSTACK = 64
_FAMILIES = (
    "fs",
    "proc",
    "net",
    "text",
    "cache",
    "log",
    "meta",
    "pure",
    "session_state",
    "calls",
    "fs_lines",
    "clock",
)  # clock after text: its time.now wins

_ctx: contextvars.ContextVar[CallContext] = contextvars.ContextVar("harness_call_ctx")
_ctx_set = _ctx.set
_ctx_reset = _ctx.reset
_monotonic = time.monotonic
_outcome = tuple_maker(Outcome)  # one per script run
_CONTAINERS = (list, dict)


def current_context() -> CallContext:
    """The context of the call being evaluated (only valid inside a built-in)."""
    return _ctx.get()


def _load_functions() -> dict[str, Callable[..., Any]]:
    functions: dict[str, Callable[..., Any]] = {}
    for family in _FAMILIES:
        name = f"harness.runtime.builtins.{family}"
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue  # family not built yet: its names are simply absent
            raise
        functions.update(module.FUNCTIONS)
    return functions


_DECISIONS = """
def allow():
    # The same decision as returning None (docs/spec.md §4), and the cheapest value to hand
    # back to Python: a dict would cross the boundary key by key.
    return None

def block(reason = ""):
    if type(reason) != "string":
        fail("block() takes a string reason, got " + type(reason))
    return {"action": "block", "reason": reason}

def modify(payload):
    if type(payload) != "dict":
        fail("modify() takes a dict payload, got " + type(payload))
    return {"action": "modify", "payload": payload}
"""


class _Bound:
    """Calls ``fn(current context, *args)``; turns harness errors into plain messages."""

    __slots__ = ("fn", "name")

    def __init__(self, name: str, fn: Callable[..., Any]) -> None:
        self.name = name
        self.fn = fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        for arg in (*args, *kwargs.values()) if args or kwargs else ():
            if type(arg) in _NESTED:
                _bounded(arg, f"an argument of {self.name}()")
        try:
            value = self.fn(_ctx.get(), *args, **kwargs)
        except BuiltinError:
            raise
        except TypeError as exc:
            # Wrong arity or unknown keyword from the script; the context is not an
            # argument the script passed, so take it out of the counts.
            msg = _ARITY.sub(lambda m: f"{m.group(1)}{int(m.group(2)) - 1}", str(exc))
            msg = msg.replace(self.fn.__name__ + "()", "").strip()
            raise BuiltinError(f"{self.name}(): {msg}") from None
        if type(value) in _NESTED:
            _bounded(value, f"the value {self.name}() returned")
        return value


_NESTED = (dict, list, tuple)


def _bounded(value: Any, what: str) -> None:
    """Raise the nesting rule's message (a script error) for a value too deep."""
    problem = nesting.value_problem(value, what)
    if problem is not None:
        raise BuiltinError(problem)


def _cancelled() -> bool:
    ctx = _ctx.get(None)
    if ctx is None:
        return False
    if CANCELLED and ctx.call_id in CANCELLED:  # runtime/cancel.py: the caller gave up
        return True
    return ctx.deadline is not None and time.monotonic() > ctx.deadline


_ARITY = re.compile(r"(takes (?:from \d+ to )?|but |at (?:least|most) )(\d+)")


def _print(*args: Any, sep: str = " ", **_: Any) -> None:
    for arg in args:
        if type(arg) in _NESTED:
            _bounded(arg, "an argument of print()")
    ctx = _ctx.get(None)
    text = sep.join(a if isinstance(a, str) else repr(a) for a in args)
    if ctx is not None and ctx.log is not None:
        ctx.log("info", text, {"source": "print", "tool": ctx.tool})


class TooDeep(Exception):
    """A script nests deeper than the parser's stack allows (see runtime/nesting.py)."""


class CompiledScripts:
    """Frozen modules by (kind, file, line, source): the engine's compile cache.

    The source string is the key (str caches its hash, so a hit is one dict lookup;
    hashing the text per call would dominate a fast call). In front of the full map,
    the last module per source is checked with kind and file compared by identity,
    which is what a hit on the hot path always is; anything else takes the full key.
    ``put`` runs under a lock (calls run on several threads).
    """

    __slots__ = ("last", "_all", "_lock")

    def __init__(self) -> None:
        # source -> (kind, filename, line, module) of its last use: the engine checks
        # it inline (``hit[0] is kind and ...``) before calling get().
        self.last: dict[str, tuple[str, str, int, sl.FrozenModule]] = {}
        self._all: dict[tuple[str, str, int, str], sl.FrozenModule] = {}
        self._lock = threading.Lock()

    def get(self, kind: str, source: str, filename: str, line: int) -> sl.FrozenModule | None:
        hit = self.last.get(source)
        if hit is not None and hit[0] is kind and hit[1] is filename and hit[2] == line:
            return hit[3]
        frozen = self._all.get((kind, filename, line, source))
        if frozen is not None:
            self.last[source] = (kind, filename, line, frozen)
        return frozen

    def put(
        self, kind: str, source: str, filename: str, line: int, frozen: sl.FrozenModule
    ) -> None:
        with self._lock:
            self._all[(kind, filename, line, source)] = frozen
            self.last[source] = (kind, filename, line, frozen)

    def __len__(self) -> int:
        return len(self._all)


class Engine:
    """Compiles scripts into frozen modules (cached) and calls them under a deadline."""

    def __init__(self) -> None:
        self._functions = _load_functions()
        self._globals = sl.Globals.extended_by([sl.LibraryExtension.StructType])
        self._dialect = sl.Dialect.standard()
        self._dialect.enable_load = False
        self._compiled = CompiledScripts()
        self._last = self._compiled.last.get
        self._lock = threading.Lock()
        # Tool modules with crossing's wrapper, and those of them called through it
        # (from their first list or dict result on: an int-returning tool never pays).
        self._json_able: set[sl.FrozenModule] = set()
        self._json_run: set[sl.FrozenModule] = set()
        # One options object for every evaluation: the cancellation check reads the
        # deadline of the call in flight from the context variable (it runs about
        # every 1000 instructions, so this costs nothing on short calls).
        self._options = sl.EvalOptions(check_cancelled=_cancelled, max_callstack_size=MAX_CALLSTACK)

    @property
    def functions(self) -> Mapping[str, Callable[..., Any]]:
        return self._functions

    # -- compilation -------------------------------------------------------------

    def _prelude(self, kind: str) -> str:
        lines = []
        for module, names in surface.module_names(kind).items():
            present = [n for n in names if f"{module}.{n}" in self._functions]
            fields = ", ".join(f"{n} = __{module}_{n}" for n in present)
            lines.append(f"{module} = struct({fields})")
        return "\n".join(lines) + "\n"

    def _new_module(self, kind: str) -> sl.Module:
        module = sl.Module()
        crossing.prepare(module, self._dialect)  # before the prelude binds "json"
        for mod, names in surface.module_names(kind).items():
            for n in names:
                fn = self._functions.get(f"{mod}.{n}")
                if fn is not None and f"{mod}.{n}" in crossing.JSON_BUILTINS:
                    crossing.bind_builtin(
                        module, self._dialect, mod, n, _Bound(f"{mod}.{n}", fn)
                    )  # lists of dicts
                elif fn is not None:
                    module.add_callable(f"__{mod}_{n}", _Bound(f"{mod}.{n}", fn))
        if kind == "hook":
            # Decisions are plain Starlark (no round trip into Python); modify() and
            # block() check their argument types and fail with a clear message.
            sl.eval(module, sl.parse("<decisions>", _DECISIONS, self._dialect), self._globals)
        module.add_callable("print", _print)
        for name in surface.TOP_FUNCTIONS[kind]:
            visible = surface.RENAMED_CALLS.get(name, name)
            fn = self._functions.get(visible)
            if fn is not None:
                module.add_callable(visible, _Bound(name, fn))
        sl.eval(module, sl.parse("<prelude>", self._prelude(kind), self._dialect), self._globals)
        return module

    def compile(self, kind: str, source: str, filename: str, line: int) -> sl.FrozenModule:
        """Compile ``source`` (whose first line is ``line`` of ``filename``), cached."""
        # The source string itself is the content key: str caches its hash, so a hit
        # costs one dict lookup (hashing the text per call would dominate a fast call).
        frozen = self._compiled.get(kind, source, filename, line)
        if frozen is not None:
            return frozen
        padded = "\n" * max(line - 1, 0) + rename_calls(source)
        deep = nesting.too_deep(padded)
        if deep is not None:  # the parser would overflow the native stack (SIGSEGV)
            raise TooDeep(
                f"{nesting.message('script' if kind != 'when' else 'when expression')}"
                f" (at {filename}:{deep[0]})"
            )
        ast = sl.parse(filename, padded, self._dialect)
        module = self._new_module(kind)
        sl.eval_with(self._options, module, ast, self._globals)
        wrapped = kind == "tool" and crossing.add_wrapper(module, self._dialect)
        frozen = module.freeze()
        if wrapped:
            with self._lock:
                self._json_able.add(frozen)
        self._compiled.put(kind, source, filename, line, frozen)
        return frozen

    # -- calls -------------------------------------------------------------------

    def call(
        self,
        kind: str,
        source: str,
        filename: str,
        line: int,
        entry: str,
        args: tuple[Any, ...],
        ctx: CallContext,
        timeout_ms: int,
    ) -> Outcome:
        """Compile if needed, then call ``entry(*args)``. Never raises for script faults."""
        start = _monotonic()
        deep = _deep_args(args, kind, ctx, filename, start)
        if deep is not None:
            return deep
        outer = ctx.deadline
        if timeout_ms > 0:
            deadline = start + timeout_ms * 0.001
            if outer is None or deadline < outer:
                ctx.deadline = deadline
        token = _ctx_set(ctx)
        try:
            hit = self._last(source)  # CompiledScripts.last: the hot path, inline
            if hit is not None and hit[0] is kind and hit[1] is filename and hit[2] == line:
                frozen = hit[3]
            else:
                frozen = self._compiled.get(kind, source, filename, line) or self.compile(
                    kind, source, filename, line
                )
            # starlark-pyo3 converts return values through JSON, so what comes back is
            # JSON-compatible by construction; anything else raised a serde error.
            if frozen in self._json_run and entry == _TOOL_ENTRY:
                value = crossing.call(frozen, self._options, args)  # large results: JSON
            else:
                value = frozen.call_with(self._options, entry, *args).value
                if type(value) in _CONTAINERS and frozen in self._json_able:
                    self._json_run.add(frozen)
        except sl.StarlarkError as exc:
            return _failure(exc, entry, start, timeout_ms)
        except TooDeep as exc:
            return Outcome(status="error", error=str(exc), duration_ms=_ms(start))
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # noqa: BLE001 - Rust panics are BaseException
            return Outcome(
                status="crash", error=f"script engine failed: {exc}", duration_ms=_ms(start)
            )
        finally:
            _ctx_reset(token)
            ctx.deadline = outer
        if type(value) in _NESTED:
            return _result(value, kind, ctx, filename, start)
        return _outcome(("ok", value, None, (_monotonic() - start) * 1000.0))


def _deep_args(
    args: tuple[Any, ...], kind: str, ctx: CallContext, filename: str, start: float
) -> Outcome | None:
    """The error Outcome for arguments that break the nesting rule, else None."""
    for arg in args:
        if type(arg) in _NESTED:
            problem = nesting.value_problem(arg, f"the arguments of {_who(kind, ctx, filename)}")
            if problem is not None:
                return Outcome(status="error", error=problem, duration_ms=_ms(start))
    return None


def _result(value: Any, kind: str, ctx: CallContext, filename: str, start: float) -> Outcome:
    """The Outcome of a list or dict a script returned, under the nesting rule."""
    problem = nesting.value_problem(value, f"the value {_who(kind, ctx, filename)} returned")
    if problem is not None:
        return Outcome(status="error", error=problem, duration_ms=_ms(start))
    return _outcome(("ok", value, None, (_monotonic() - start) * 1000.0))


def _who(kind: str, ctx: CallContext, filename: str) -> str:
    if kind == "tool":
        return f'tool "{ctx.tool}"'
    return f"the {'hook' if kind == 'hook' else 'when expression'} in {filename}"


def _ms(start: float) -> float:
    return (_monotonic() - start) * 1000.0


_LOCATION = re.compile(
    r"^[ \t]*(?:-->\s*(?P<file>.+?):(?P<line>\d+):\d+|\* (?P<tfile>.+?):(?P<tline>\d+), in )",
    re.MULTILINE,
)
# ``[ \t]*``, not ``\s*``, after ``^``: a message of many blank lines (``fail(" \n" * n)``)
# made each line start rescan the rest (quadratic); now each scans its own line only.
_ERROR_LINE = re.compile(r"^error: (?P<msg>.*?)(?=^[ \t]*-->|\Z)", re.MULTILINE | re.DOTALL)
_PY_PREFIX = re.compile(r"^(?:BuiltinError|JailError|ValueError|TypeError): ")


def _failure(exc: BaseException, entry: str, start: float, timeout_ms: int) -> Outcome:
    text = str(exc)
    if "Evaluation cancelled" in text:
        return Outcome(
            status="timeout", error=f"timed out after {timeout_ms} ms", duration_ms=_ms(start)
        )
    if "Module has no symbol `" + entry + "`" in text or "is not exported" in text:
        params = "args" if entry == "run" else "event, payload"
        return Outcome(
            status="error",
            error=f"script does not define {entry}({params})",
            duration_ms=_ms(start),
        )
    if "serde::serialize" in text or crossing.not_json(text):
        kind = re.search(r"on type `(\w+)`", text)
        return Outcome(
            status="error",
            error=f"{entry}() returned a value that is not "
            f"JSON-compatible ({kind.group(1) if kind else _not_json_kind(text)})",
            duration_ms=_ms(start),
        )
    return Outcome(status="error", error=script_error_message(text), duration_ms=_ms(start))


def _not_json_kind(text: str) -> str:
    return "a dict key that is not a string" if crossing.not_json(text) else "unknown type"


def script_error_message(text: str) -> str:
    """Reduce a starlark traceback to ``message (at file:line)``."""
    m = _ERROR_LINE.search(text)
    msg = m.group("msg").strip() if m else text.strip().splitlines()[-1]
    msg = msg.removeprefix("fail: ")
    msg = _PY_PREFIX.sub("", msg)
    if "too deep" in msg.lower() or "stack overflow" in msg.lower():
        msg = f"recursion too deep (more than {MAX_CALLSTACK} frames): {msg}"
    # The innermost frame in the script itself (not in the built-in prelude).
    locs = [
        (m.group("file") or m.group("tfile"), m.group("line") or m.group("tline"))
        for m in _LOCATION.finditer(text)
    ]
    locs = [loc for loc in locs if not loc[0].startswith("<")]
    if locs:
        file, line = locs[-1]
        return f"{msg} (at {file}:{line})"
    return msg


_TOOL_ENTRY = surface.TOOL_ENTRY[0]
_HOOK_ENTRY = surface.HOOK_ENTRY[0]


class InProcessRuntime:
    """``runtime.isolation: inprocess``: scripts run in the calling process.

    Same results as the process pool, but no hard kill and no memory cap: a script
    stuck inside one long built-in or allocation is only stopped cooperatively.
    """

    def __init__(self) -> None:
        self.engine = Engine()

    def run_tool(
        self,
        script: str,
        filename: str,
        line: int,
        args: Mapping[str, Any],
        ctx: CallContext,
        timeout_ms: int,
    ) -> Outcome:
        ctx.kind = "tool"
        # Starlark converts the arguments into values of its own: no copy needed.
        return self.engine.call(
            "tool",
            script,
            filename,
            line,
            _TOOL_ENTRY,
            (args if type(args) is dict else dict(args),),
            ctx,
            timeout_ms,
        )

    def run_hook(
        self,
        script: str,
        filename: str,
        line: int,
        event: object,
        payload: object,
        ctx: CallContext,
        timeout_ms: int,
    ) -> Outcome:
        ctx.kind = "hook"
        source, entry, args = hook_call(script, event, payload)
        return self.engine.call("hook", source, filename, line, entry, args, ctx, timeout_ms)

    def eval_when(
        self,
        expr: str,
        filename: str,
        line: int,
        event: str,
        payload: Mapping[str, Any],
        ctx: CallContext,
        timeout_ms: int,
    ) -> Outcome:
        ctx.kind = "when"
        return self.engine.call(
            "when",
            when_source(expr),
            filename,
            line,
            "harness_when",
            (event, dict(payload)),
            ctx,
            timeout_ms,
        )

    def close(self) -> None:
        # Prepared sandboxes belong to the process; close() leaves nothing behind.
        prewarm.discard_all()


def hook_call(script: str, event: object, payload: object) -> tuple[str, str, tuple[Any, ...]]:
    """(source, entry, arguments) of a hook call; UNUSED parameters cost nothing."""
    if event is UNUSED and payload is UNUSED:
        wrapped = noargs_source(script)
        if wrapped is not None:
            return wrapped, NOARGS_ENTRY, ()
    if event is UNUSED:
        event = 0
    if payload is UNUSED:
        payload = 0
    elif not isinstance(payload, dict):
        payload = dict(payload)  # type: ignore[call-overload]
    return script, _HOOK_ENTRY, (event, payload)
