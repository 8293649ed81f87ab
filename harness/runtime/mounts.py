"""Runtime mounts: the host paths a sandboxed program needs to run, decided in one place.

Both sandboxed paths ask :func:`runtime_mounts`: ``exec.run`` (``sandbox.toolchains``:
the interpreter of a workspace virtualenv) and upstream stdio servers
(``upstream/launch.runtime_paths``: the program, its interpreter, its virtualenv, the
files its declared arguments name). It is also the only reader of ``pyvenv.cfg``
(tests/test_architecture.py checks both), because that file and ``.venv/bin`` in the
workspace are written by sandboxed commands and servers: a path they name may decide
a mount only when it passes the same checks as everything else (issue 22 item 2; the
second review fixed exec.run alone, and the server path came back):

- ``home``/``executable`` count only when they are, or hold, an executable file
  named like a Python interpreter (``python``, ``python3``, ``python3.N``);
- an interpreter (on any hop of its link chain) binds its install prefix only when
  that is a real installation (``lib/python3.N/os.py``, or ``bin/node`` beside
  ``lib/node_modules``), else only its ``bin`` directory;
- a program or interpreter named elsewhere binds its own file, and the virtualenv it
  lives in (a directory holding ``pyvenv.cfg``);
- then every candidate must exist, must not be ``/``, the system directories the
  sandbox has anyway, inside or around the workspace, the home directory or above
  it, and must be an acceptable ``exec.mounts`` entry (``config.mount_problem``: no
  ``/etc``, ``/proc``..., nothing holding a secret store of docs/spec.md §8.3).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence

from harness.config import mount_problem

VENV_CFG = "pyvenv.cfg"
_PYTHON_NAME = re.compile(r"python(?:3(?:\.[0-9]+)?)?")
_CFG_MAX = 1 << 16
_venv_cache: dict[str, tuple[tuple[object, ...], tuple[str, ...]]] = {}


def runtime_mounts(
    workspace: str,
    *,
    system: Sequence[str],
    programs: Iterable[str] = (),
    interpreters: Iterable[str] = (),
    venvs: Iterable[str] = (),
    files: Iterable[str] = (),
    home: str = "",
) -> tuple[str, ...]:
    """Real host paths to bind read-only so that ``programs`` (named by the operator:
    their own files too), ``interpreters`` (named by a script's ``#!`` line, which a
    sandboxed command may write: only what they need from an installation) and the
    interpreters of the virtualenvs ``venvs`` run, plus the existing ``files``; never
    one that a virtualenv's own files alone could choose (module docstring). ``system``:
    the real paths the sandbox shows anyway. Sorted, parents before children, none
    inside another."""
    wanted: list[str] = []
    for venv in venvs:
        wanted += venv_mounts(venv)
    for program in programs:
        wanted += program_mounts(program, own_file=True)
    for interpreter in interpreters:
        wanted += program_mounts(interpreter, own_file=False)
    wanted += [os.path.realpath(f) for f in files if os.path.isfile(f)]
    return _acceptable(wanted, workspace, system, home)


def is_venv(path: str) -> bool:
    """Whether ``path`` is a virtual environment (it holds the venv's config file)."""
    return os.path.isfile(os.path.join(path, VENV_CFG))


def venv_interpreters(venv: str) -> list[str]:
    """The base interpreters ``venv/pyvenv.cfg`` names (``home``, ``executable``) that
    are Python interpreters on this host. The one reader of that file."""
    try:
        with open(os.path.join(venv, VENV_CFG), "rb") as f:
            text = f.read(_CFG_MAX).decode("utf-8", "replace")
    except OSError:
        return []
    out: list[str] = []
    for line in text.splitlines():
        key, _, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if not value.startswith("/"):
            continue
        if key == "home":
            home = os.path.normpath(value)
            out += [
                os.path.join(home, n)
                for n in ("python3", "python")
                if is_python(os.path.join(home, n))
            ]
        elif key == "executable" and is_python(os.path.normpath(value)):
            out.append(os.path.normpath(value))
    return out


def venv_mounts(venv: str) -> tuple[str, ...]:
    """Candidates for a virtualenv: the venv itself, its ``bin/python*`` link chains and
    its base interpreters. Cached on the identity of ``pyvenv.cfg`` and the links."""
    key = tuple(_ident(os.path.join(venv, p)) for p in (VENV_CFG, "bin/python3", "bin/python"))
    hit = _venv_cache.get(venv)
    if hit is not None and hit[0] == key:
        return hit[1]
    found = [venv] if os.path.isfile(os.path.join(venv, VENV_CFG)) else []
    for exe in ("python3", "python"):
        found += interpreter_mounts(os.path.join(venv, "bin", exe))
    for base in venv_interpreters(venv):
        found += interpreter_mounts(base)
    result = tuple(p for p in dict.fromkeys(found) if p)
    if len(_venv_cache) > 64:
        _venv_cache.clear()
    _venv_cache[venv] = (key, result)
    return result


def program_mounts(program: str, *, own_file: bool) -> list[str]:
    """Candidates for a program: its interpreter install (see
    :func:`interpreter_mounts`), a real installation it is the ``bin/`` program of, the
    virtualenv it lives in, and (``own_file``) the executable file itself."""
    out = interpreter_mounts(program)
    for path in (program, os.path.realpath(program)):
        prefix = _prefix(path)
        if is_install_prefix(prefix):
            out.append(prefix)
        venv = _venv_of(path)
        if venv is not None:
            out += venv_mounts(venv)
        if own_file and os.path.isfile(path) and os.access(path, os.X_OK):
            out.append(path)
    return out


def interpreter_mounts(exe: str) -> list[str]:
    """For every hop of ``exe``'s link chain that is a Python interpreter (or node):
    its install prefix when that is a real installation, else its ``bin`` directory."""
    out = []
    for hop in (exe, *link_hops(exe)):
        if is_python(hop) or (os.path.basename(hop) == "node" and os.path.isfile(hop)):
            prefix = _prefix(hop)
            if is_install_prefix(prefix):
                out.append(prefix)
            elif os.path.basename(os.path.dirname(hop)) == "bin":
                out.append(os.path.dirname(hop))
    return out


def is_python(path: str) -> bool:
    """Named like a Python interpreter, and an executable file (or a link to one)."""
    return (
        _PYTHON_NAME.fullmatch(os.path.basename(path)) is not None
        and os.path.isfile(path)
        and os.access(path, os.X_OK)
    )


def is_install_prefix(prefix: str) -> bool:
    """A Python installation (``lib/python3.N/os.py``) or a node one (``bin/node`` and
    ``lib/node_modules``), not a directory that merely has an interpreter in its
    ``bin`` (``~/.local``: its ``share`` may hold keyrings)."""
    lib = os.path.join(prefix, "lib")
    if os.path.isfile(os.path.join(prefix, "bin", "node")) and os.path.isdir(
        os.path.join(lib, "node_modules")
    ):
        return True
    try:
        names = os.listdir(lib)
    except OSError:
        return False
    return any(
        _PYTHON_NAME.fullmatch(n) is not None
        and n != "python"
        and os.path.isfile(os.path.join(lib, n, "os.py"))
        for n in names
    )


def link_hops(path: str, limit: int = 40) -> list[str]:
    """Every place a chain of symbolic links starting at ``path`` passes through (as
    each link says, normalized), then the real path. Each must be visible in the
    sandbox for the chain to resolve there."""
    out: list[str] = []
    cur = path
    for _ in range(limit):
        try:
            target = os.readlink(cur)
        except OSError:
            break
        cur = os.path.normpath(os.path.join(os.path.dirname(cur), target))
        out.append(cur)
    if out:
        out.append(os.path.realpath(path))
    return out


# ---------------------------------------------------------------- helpers


def _prefix(path: str) -> str:
    """The install prefix of a program: above its ``bin`` directory, else its directory."""
    d = os.path.dirname(path)
    return os.path.dirname(d) if os.path.basename(d) == "bin" else d


def _venv_of(path: str) -> str | None:
    d = os.path.dirname(path)
    for _ in range(3):
        if os.path.isfile(os.path.join(d, VENV_CFG)):
            return d
        d = os.path.dirname(d)
    return None


def _ident(path: str) -> object:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _acceptable(
    wanted: Iterable[str], workspace: str, system: Sequence[str], home: str
) -> tuple[str, ...]:
    """The candidates that may be bound, as written (a link on an interpreter's chain
    must exist in the sandbox too; bubblewrap binds what it leads to), each checked
    as written and as resolved."""
    homes = {os.path.realpath(h) for h in (home, os.path.expanduser("~")) if h}
    out: list[str] = []
    for path in dict.fromkeys(os.path.normpath(p) for p in wanted if p):
        real = os.path.realpath(path)
        if (
            "/" in (path, real)
            or not os.path.exists(path)
            or any(_inside(path, r) for r in system)
            or any(_inside(p, workspace) or _inside(workspace, p) for p in (path, real))
            or any(_inside(h, p) for h in homes for p in (path, real))
            or mount_problem(path, workspace) is not None
        ):
            continue
        out.append(path)
    return tuple(
        sorted(
            (p for p in out if not any(p != o and _inside(p, o) for o in out)),
            key=lambda p: (p.count("/"), p),
        )
    )
