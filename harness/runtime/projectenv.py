"""The project's interpreter for commands (issue 25): which virtualenv is the
project's, its ``bin`` first on the PATH of ``exec.run``, and what to say about a
program that only harness's own virtualenv has.

The project venv is ``exec.venv`` (relative to the project root) when harness.md
names one, else ``.venv`` or ``venv`` in the workspace when it holds a ``bin``
directory. Harness's own virtualenv (the one running this process) is never the
project's: commands must not depend on it, and messages never advise mounting it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from harness.config import Config

VENV_DIRS = (".venv", "venv")


def project_venv(config: Config, workspace: str) -> str | None:
    """Absolute path of the project's virtualenv, or None."""
    if config.exec.venv:
        path = os.path.normpath(os.path.join(str(config.root), config.exec.venv))
        return path if os.path.isdir(os.path.join(path, "bin")) else None
    for name in VENV_DIRS:
        path = os.path.join(workspace, name)
        if os.path.isdir(os.path.join(path, "bin")):
            return path
    return None


def with_venv(env: Mapping[str, str], venv: str | None) -> dict[str, str]:
    """``env`` with ``venv``'s bin first on PATH and VIRTUAL_ENV set (as ``activate``
    does); unchanged without a venv."""
    out = dict(env)
    if venv is None:
        return out
    bindir = os.path.join(venv, "bin")
    rest = [p for p in out.get("PATH", os.defpath).split(os.pathsep) if p and p != bindir]
    out["PATH"] = os.pathsep.join([bindir, *rest])
    out["VIRTUAL_ENV"] = venv
    return out


def own_venv() -> str | None:
    """The virtualenv harness itself runs from, or None (a system install)."""
    return sys.prefix if sys.prefix != sys.base_prefix else None


def in_own_venv(path: str) -> bool:
    own = own_venv()
    if own is None:
        return False
    real, root = os.path.realpath(path), os.path.realpath(own)
    return real == root or real.startswith(root.rstrip("/") + "/") or path.startswith(own + "/")


def own_venv_message(cmd: str, host: str, venv: str | None, workspace: str) -> str:
    """The message for a program found only in harness's own virtualenv."""
    name = os.path.basename(cmd)
    if venv is None:
        where = (
            "the project has no virtualenv (.venv or venv in the workspace, or exec.venv "
            f"in harness.md); create one (python3 -m venv .venv) and install it there "
            f"(.venv/bin/pip install {name})"
        )
    else:
        shown = os.path.relpath(venv, workspace) if venv.startswith(workspace + "/") else venv
        where = (
            f"the project's virtualenv {shown} does not have it; install it there "
            f"({shown}/bin/pip install {name})"
        )
    return (
        f'exec.run: program "{cmd}" is {host}, in harness\'s own virtualenv, which '
        f"commands do not use: {where}"
    )
