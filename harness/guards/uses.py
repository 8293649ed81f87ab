"""The uses of a value the guard checker judges: keys read, arguments, results,
membership, comparisons with strings, ``len``, string methods, tool names. Each
reports where a use can never do what it says, with the fix (a mixin of
:class:`~harness.guards.flow.Checker`)."""

from __future__ import annotations

import ast
from dataclasses import replace

import re2

from harness.artifacts.problems import closest, suggest
from harness.guards import shapes as S
from harness.guards.model import MAX_INFERRED, Context, Env, Finding
from harness.guards.shapes import ANY, Shape, join, of

_RE2_QUIET = re2.Options()
_RE2_QUIET.log_errors = False

# Methods of other languages' strings and dicts, and the Starlark for them.
_OTHER_LANGUAGES = {
    "casefold": ".lower()",
    "contains": '"x" in value',
    "includes": '"x" in value',
    "has_key": '"key" in value',
    "trim": ".strip()",
    "toLowerCase": ".lower()",
    "toUpperCase": ".upper()",
    "startsWith": ".startswith(...)",
    "endsWith": ".endswith(...)",
    "length": "len(value)",
    "size": "len(value)",
    "copy": "dict(value) / list(value)",
}


class Uses:
    """Checks of one script; ``findings`` collects what they report."""

    ctx: Context
    source: str
    findings: dict[tuple[int, int, str], Finding]

    def report(self, node: ast.AST, code: str, message: str, severity: str = "error") -> None:
        line, col = getattr(node, "lineno", 1), getattr(node, "col_offset", 0) + 1
        key = (line, col, code)
        if key not in self.findings:
            self.findings[key] = Finding(line, col, code, message, severity)

    def src(self, node: ast.AST, default: str) -> str:
        """How the script wrote ``node`` (one line), or ``default``."""
        if self.source:
            seg = ast.get_source_segment(self.source, node)
            if seg and "\n" not in seg and len(seg) <= 60:
                return seg
        return default

    def _hint(self, shape: Shape) -> str:
        """What to write instead of using ``shape`` as text."""
        if shape.role == "payload" and self.ctx.text_key:
            origin = f" ({self.ctx.origin})" if self.ctx.origin else ""
            return f'{origin}; for the text write payload["{self.ctx.text_key}"]'
        if shape.unknown:
            return f"; {shape.unknown}"
        if shape.role == "result":
            return (
                '; payload["result"] is the value the tool returned (ai-harness: the '
                'result text); for the text the model sees write payload["content"]'
            )
        return ""

    def _shape_of(self, shape: Shape) -> str:
        what = shape.what or "the value"
        if shape.role == "payload":
            keys = ", ".join(shape.keys or ())
            return f"{what} is a dict ({keys})" if keys else f"{what} is a dict"
        if shape.keys:
            return f"{what} is {shape.text()} with keys {', '.join(shape.keys)}"
        return f"{what} is {shape.text()}"

    def key(self, node: ast.AST, obj: Shape, name: str, env: Env, how: str) -> Shape:
        """``obj[name]`` / ``obj.get(name)``: its shape, or a finding when never there."""
        shown = f'{obj.what}["{name}"]' if obj.what else f'["{name}"]'
        if obj.role == "arguments":
            return self.argument(node, obj, name, env, shown)
        if obj.role == "payload" and obj.keys is not None and name in obj.keys:
            return self.payload_key(name, obj.keys[name], env, shown)
        if obj.keys is not None and S.DICT in obj.kinds and name not in obj.keys and not obj.extra:
            self.unknown_key(node, obj, name, how)
            return ANY.named(shown)
        if obj.keys is not None and name in obj.keys:
            return obj.keys[name].named(shown)
        if obj.known and obj.kinds and S.DICT not in obj.kinds and how == "[]":
            self.report(
                node,
                "guard-shape",
                f"{self._shape_of(obj)}, so {shown} fails at run time (the hook then "
                f"fails closed){self._hint(obj)}",
            )
        return ANY.named(shown)

    def unknown_key(self, node: ast.AST, obj: Shape, name: str, how: str) -> None:
        keys = sorted(obj.keys or ())
        if obj.role == "payload":
            instead = self.ctx.origin_keys.get(name)
            fix = f"; write {instead}" if instead else suggest(name, keys)
            self.report(
                node,
                "payload-key-unknown",
                f'reads payload key "{name}", which {self.ctx.event} payloads never carry, so '
                f"it is always missing{fix}; they carry: {', '.join(obj.keys or ())}",
            )
            return
        what = obj.what or "the value"
        self.report(
            node,
            "guard-key-unknown",
            f'reads key "{name}" of {what}, which never has it{suggest(name, keys)}; '
            f"its keys: {', '.join(keys)}",
        )

    def payload_key(self, name: str, declared: Shape, env: Env, shown: str) -> Shape:
        if name == "name" and self.ctx.event in ("tool.pre", "tool.post"):
            return declared.named(shown, "toolname")
        if name in ("arguments", "args") and self.ctx.event in ("tool.pre", "tool.post"):
            return self.arguments_shape(env).named(shown, "arguments")
        if name == "result" and self.ctx.event == "tool.post":
            return self.result_shape(env).named(shown, "result")
        return declared.named(shown)

    def tools_of(self, env: Env) -> list[str]:
        if env.tools is None:
            return sorted(self.ctx.tools)
        return sorted(t for t in env.tools if t in self.ctx.tools)

    def arguments_shape(self, env: Env) -> Shape:
        if env.tools is None and (self.ctx.prefixes or self.ctx.open_names):
            return of(S.DICT)
        every = getattr(self.ctx.tools, "every_argument", None)
        if env.tools is None and every is not None:
            shape: Shape = every()
            return shape
        names = self.tools_of(env)
        keys: dict[str, Shape] = {}
        for name in names:
            params = self.ctx.tools[name].params
            if params is None:
                return of(S.DICT)
            for k, v in params.items():
                keys[k] = join(keys[k], v) if k in keys else v
        if env.tools is None and (self.ctx.prefixes or self.ctx.open_names):
            return of(S.DICT)
        if env.tools is not None and any(
            t not in self.ctx.tools and self.ctx.defines(t) for t in env.tools
        ):
            return of(S.DICT)  # a server's (or built-in) tool: its parameters are not known
        # (names no tool defines are reported where they are written)
        return of(S.DICT, keys=keys)

    def argument(self, node: ast.AST, obj: Shape, name: str, env: Env, shown: str) -> Shape:
        if obj.keys is None:
            return ANY.named(shown)
        if name in obj.keys:
            return obj.keys[name].named(shown)
        names = self.tools_of(env)
        if env.tools is not None and not names:
            return ANY.named(shown)  # no tool at all: reported where the names are
        if env.tools is None:
            who = "no tool declares it"
        elif len(names) == 1:
            params = ", ".join(self.ctx.tools[names[0]].params or ()) or "none"
            who = f'tool "{names[0]}" does not declare it (its parameters: {params})'
        else:
            who = f"none of the tools it applies to ({', '.join(names)}) declares it"
        self.report(
            node,
            "guard-argument-unknown",
            f'reads argument "{name}", but {who}, so it is always missing and the guard '
            f"never fires{suggest(name, obj.keys)}",
        )
        return ANY.named(shown)

    def result_shape(self, env: Env) -> Shape:
        names = self.tools_of(env)
        if (env.tools is None and len(names) > MAX_INFERRED) or not names:
            why = (
                "this hook sees every tool's result, whose type is not declared; for the "
                'text the model sees write payload["content"]'
            )
            return replace(ANY, unknown=why)
        out = S.NOTHING
        for name in names:
            returns = self.ctx.tools[name].returns
            if returns is None and self.ctx.infer is not None:
                returns = self.ctx.infer(name)
                returns = returns if returns.known else None
            if returns is None:
                why = (
                    f'tool "{name}" declares no `returns` and its result cannot be read '
                    "from a script, so its type is not known; for the text the model "
                    'sees write payload["content"]'
                )
                return replace(ANY, unknown=why)
            out = join(out, returns)
        if env.tools is not None and any(t not in self.ctx.tools for t in env.tools):
            return replace(
                ANY,
                unknown="a server's tool result has no declared type; for "
                'the text the model sees write payload["content"]',
            )
        return out

    def membership(self, node: ast.AST, item: Shape, box: Shape, written: str = "") -> None:
        if item.role == "toolname" or box.role == "toolname":
            return
        if not box.known:
            if box.unknown and S.STR in item.kinds:
                self.report(
                    node,
                    "guard-shape-unknown",
                    f"`in` on {box.what or 'a value'} of unknown type: {box.unknown}",
                    "warning",
                )
            return
        if not box.kinds:
            return
        if box.kinds <= {S.INT, S.FLOAT, S.BOOL, S.NULL}:
            self.report(
                node,
                "guard-shape",
                f"{self._shape_of(box)}: `in` fails on it at run time{self._hint(box)}",
            )
            return
        if box.role == "result" and item.kinds == {S.STR} and S.DICT in box.kinds:
            self.in_result(node, item, box, written)
        elif box.kinds == {S.DICT} and item.kinds == {S.STR}:
            self.in_dict(node, item, box, written)
        elif box.kinds == {S.LIST} and box.item is not None and item.kinds == {S.STR}:
            if box.item.known and box.item.kinds and S.STR not in box.item.kinds:
                fix = ""
                if box.item.keys and "name" in box.item.keys:
                    fix = '; compare names: [e["name"] for e in ...], or use fs.exists(path)'
                self.report(
                    node,
                    "guard-shape",
                    f"{box.what or 'the list'} is a list of {box.item.text().split(' ', 1)[-1]}s"
                    f"{' ' + '{' + ', '.join(box.item.keys) + '}' if box.item.keys else ''}, "
                    f"so a string is never in it{fix}",
                )

    def in_result(self, node: ast.AST, item: Shape, box: Shape, written: str) -> None:
        """``"x" in payload["result"]`` where the result may be a dict: a key test there."""
        if item.texts is not None and box.keys is not None and item.texts <= set(box.keys):
            return  # a key the result declares: a key test, as meant
        unsure = box.keys is None and item.texts is not None
        self.report(
            node,
            "guard-shape-unknown" if unsure else "guard-shape",
            f"{self._shape_of(box)}: `{written or 'in'}` tests the keys of a dict result, "
            f"not its text{self._hint(box)}",
            "warning" if unsure else "error",
        )

    def in_dict(self, node: ast.AST, item: Shape, box: Shape, written: str) -> None:
        keys = box.keys
        if keys is None or box.extra:
            return  # keys not known (a custom event emitted from Python), or not all
        missing = None if item.texts is None else sorted(item.texts - set(keys))
        if missing == []:
            return
        if missing is None and box.role != "payload":
            return  # a key that comes from elsewhere: may be one of them
        shown = f'"{missing[0]}"' if missing else (item.what or "a string")
        written = written or f"{shown} in {box.what or 'it'}"
        self.report(
            node,
            "guard-shape",
            f"{self._shape_of(box)}: `{written}` tests for a key ({shown}), "
            f"which is never there{self._hint(box)}",
        )

    def equality(self, node: ast.AST, value: Shape, other: Shape, other_node: ast.AST) -> None:
        if other.kinds != {S.STR} or other.texts is None:
            return
        if value.role == "toolname":
            self.tool_names(other_node, other.texts)
            return
        if not value.known:
            if value.unknown:
                self.report(
                    node,
                    "guard-shape-unknown",
                    f"compares {value.what or 'a value'} of unknown type with a "
                    f"string: {value.unknown}",
                    "warning",
                )
            return
        if value.kinds and S.STR not in value.kinds:
            self.report(
                node,
                "guard-shape",
                f"{self._shape_of(value)}, never equal to a string{self._hint(value)}",
            )

    def tool_names(self, node: ast.AST, names: frozenset[str]) -> None:
        unknown = [name for name in sorted(names) if not self.ctx.defines(name)]
        if not unknown:
            return
        hints = []
        for name in unknown:
            match = closest(name, self.ctx.tools)
            hints.append(f'"{name}"' + (f' (did you mean "{match}"?)' if match else ""))
        some_match = any("did you mean" in h for h in hints)
        more = (
            " unless a script registers it at run time (meta.tool_register)"
            if self.ctx.open_names
            else "; a tool added from Python with Harness.tool() is not known to "
            "validate: declare it in a tool file and bind it with Harness.bind()"
            if not some_match
            else ""
        )
        self.report(
            node,
            "guard-tool-unknown",
            f'compares payload["name"] with {", ".join(hints)}, which no tool defines; '
            f"the guard never fires for {'it' if len(unknown) == 1 else 'them'}{more}",
            "warning" if self.ctx.open_names else "error",
        )

    def tool_names_all(self) -> list[str]:
        return [*self.ctx.tools, *self.ctx.extra]

    def tool_substring(self, node: ast.AST, texts: frozenset[str]) -> None:
        """``"comand" in payload["name"]``: no tool name holds the text."""
        if self.ctx.open_names or self.ctx.prefixes:
            return
        names = self.tool_names_all()
        for sub in sorted(texts):
            if any(sub in n for n in names):
                continue
            self.report(
                node,
                "guard-tool-unknown",
                f'no tool name contains "{sub}", so the guard never fires{suggest(sub, names)}',
            )

    def tool_pattern(self, node: ast.AST, patterns: frozenset[str]) -> None:
        """``re.match("run_comand", payload["name"])``: no tool name matches."""
        if self.ctx.open_names or self.ctx.prefixes:
            return
        names = self.tool_names_all()
        for pattern in sorted(patterns):
            try:
                # RE2, as the script's own re.* runs it: linear on any pattern.
                compiled = re2.compile(pattern, options=_RE2_QUIET)
            except re2.error:
                continue  # not a pattern RE2 reads: the Starlark checks' job
            if any(compiled.search(n) for n in names):
                continue
            self.report(
                node,
                "guard-tool-unknown",
                f'no tool name matches "{pattern}", so the guard never fires'
                f"{suggest(pattern, names)}",
            )

    def event_compare(self, node: ast.AST, left: Shape, right: Shape) -> None:
        """``event == "tool.post"`` in a hook that only ever sees tool.pre."""
        if left.role != "event" or right.role == "event" or right.texts is None:
            return
        other = sorted(t for t in right.texts if t != self.ctx.event)
        if other and len(other) == len(right.texts):
            self.report(
                node,
                "guard-never-true",
                f'event is always "{self.ctx.event}" in this hook (its event: field), never '
                f'"{other[0]}": this comparison never holds; fix the event: field or the '
                "comparison",
            )

    def constant_key(self, node: ast.expr, env: Env) -> ast.expr:
        """``KEY`` of a module-level ``KEY = "cmd"`` as the constant it stands for."""
        if isinstance(node, ast.Name) and node.id not in env.vars:
            shape = getattr(self, "globals", {}).get(node.id)
            if shape is not None and shape.texts is not None and len(shape.texts) == 1:
                return ast.copy_location(ast.Constant(next(iter(shape.texts))), node)
        return node

    def length(self, node: ast.AST, value: Shape) -> None:
        if value.role == "payload" and self.ctx.text_key:
            self.report(
                node,
                "guard-shape",
                f"len(payload) counts the keys of the {self.ctx.event} payload (a dict of "
                f"{len(value.keys or ())}){self._hint(value)}",
            )
        elif value.known and value.kinds and value.kinds <= {S.INT, S.FLOAT, S.BOOL, S.NULL}:
            self.report(
                node, "guard-shape", f"{self._shape_of(value)}: len() fails on it at run time"
            )
        elif not value.known and value.unknown:
            self.report(
                node,
                "guard-shape-unknown",
                f"len() of {value.what or 'a value'} of unknown type: {value.unknown}",
                "warning",
            )

    def prefixes(self, node: ast.AST, arg: Shape) -> None:
        if arg.texts is None:
            return
        for prefix in arg.texts:
            if self.ctx.open_names or self.starting(prefix):
                continue
            if any(p.startswith(prefix) or prefix.startswith(p) for p in self.ctx.prefixes):
                continue
            self.report(
                node,
                "guard-tool-unknown",
                f'no tool name starts with "{prefix}", so the guard never fires'
                f"{self.prefix_hint(prefix)}",
            )

    def starting(self, prefix: str) -> list[str]:
        """The tool names that start with ``prefix``."""
        fast = getattr(self.ctx.tools, "starting", None)
        if fast is not None:
            found: list[str] = fast(prefix)
            return found
        return [t for t in self.ctx.tools if t.startswith(prefix)]

    def prefix_hint(self, prefix: str) -> str:
        match = closest(prefix, {t[: len(prefix)] for t in self.ctx.tools})
        if match is None:
            return ""
        example = self.starting(match)
        return f' (did you mean "{match}", as in "{example[0]}"?)' if example else ""

    def text_argument(self, node: ast.AST, value: Shape, function: str) -> None:
        """A built-in that takes text (``re.search(p, s)``) given a value of another kind."""
        if value.known and value.kinds and S.STR not in value.kinds:
            self.report(
                node,
                "guard-shape",
                f"{self._shape_of(value)}, but {function}() takes a string: it fails at "
                f"run time{self._hint(value)}",
            )
        elif not value.known and value.unknown:
            self.report(
                node,
                "guard-shape-unknown",
                f"{function}() of {value.what or 'a value'} of unknown type: {value.unknown}",
                "warning",
            )

    def no_such_method(self, node: ast.AST, target: Shape, attr: str, call: bool) -> bool:
        """``x.attr`` where no kind ``x`` may have has that method: it fails at run time
        every time (``on_error: allow`` then silently disables the guard)."""
        if not target.known or not target.kinds:
            return False
        methods: frozenset[str] = frozenset()
        for kind in target.kinds:
            methods |= S.STARLARK_METHODS.get(kind, frozenset())
        if attr in methods or (call and attr in S.EVERY_METHOD):
            return False  # a method of another kind: the shape checks say what to write
        owner = node.value if isinstance(node, ast.Attribute) else node
        what = self.src(owner, target.what or "the value")
        shown = f".{attr}()" if call else f".{attr}"
        if not call and S.DICT in target.kinds:
            fix = f'write {what}["{attr}"] (Starlark dicts have no attributes)'
        elif attr in _OTHER_LANGUAGES:
            fix = f"write {_OTHER_LANGUAGES[attr]}"
        elif methods:
            fix = f"its methods are {', '.join(sorted(methods))}{suggest(attr, methods)}"
        else:
            fix = "it has no methods"
        self.report(
            node,
            "guard-no-method",
            f"{what} is {target.text()}: it has no {shown}, so this fails at every call "
            f"(with on_error: allow the guard never acts); {fix}",
        )
        return True

    def dict_view(self, node: ast.AST, target: Shape, attr: str) -> None:
        if attr in ("keys", "values", "items") and target.known and S.DICT not in target.kinds:
            self.report(
                node,
                "guard-shape",
                f"{self._shape_of(target)}: it has no {attr}(){self._hint(target)}",
            )

    def str_method(self, node: ast.AST, target: Shape, attr: str) -> None:
        if not target.known:
            if target.unknown:
                self.report(
                    node,
                    "guard-shape-unknown",
                    f"{target.what or 'the value'}.{attr}() on a value of unknown "
                    f"type: {target.unknown}",
                    "warning",
                )
            return
        if target.kinds and S.STR not in target.kinds:
            self.report(
                node,
                "guard-shape",
                f"{self._shape_of(target)}, not a string: .{attr}() fails at run time"
                f"{self._hint(target)}",
            )
