"""``exec.mounts``: which host paths a project may mount into the command sandbox
(docs/spec.md §5, §8.3). Checked in ``parse_config`` (a validate problem) and again
before every sandboxed command."""

from __future__ import annotations

import os
from pathlib import Path

# exec.mounts: never these, nor anything above them (the home directory as a whole,
# host kernel and device state, the system's secrets); never a path that holds a
# secret store (docs/spec.md §8.3) or that overlaps the workspace (its protected entries
# would show, writable or not, under another path).
_MOUNT_REFUSED = (
    "/",
    "/proc",
    "/sys",
    "/dev",
    "/etc",
    "/run",
    "/var/run",
    "/boot",
    "/root",
    "/home",
    "/tmp",
    "/var/tmp",
)
_MOUNT_SECRETS = (
    ".ssh",
    ".aws",
    ".gnupg",
    ".docker",
    ".kube",
    ".azure",
    ".netrc",
    ".password-store",
    ".git-credentials",
    ".pypirc",
    ".npmrc",
    ".config/gcloud",
    ".config/gh",
    ".local/share/keyrings",
)


def mount_path(entry: str) -> str:
    """The host path an ``exec.mounts`` entry names (``~`` expanded, links resolved)."""
    return os.path.realpath(os.path.expanduser(entry))


def mount_problem(entry: str, workspace: Path | str) -> str | None:
    """Why an ``exec.mounts`` entry is refused, or None. Checked in ``parse_config``
    (a validate problem) and again before every sandboxed command."""
    where = f'config exec.mounts entry "{entry}"'
    if not (entry == "~" or entry.startswith(("/", "~/"))):
        return f"{where} must be an absolute path or start with ~/"
    real = mount_path(entry)
    home = os.path.realpath(os.path.expanduser("~"))
    ws = os.path.realpath(workspace)

    def inside(path: str, root: str) -> bool:
        return path == root or path.startswith(root.rstrip("/") + "/")

    if real == home:
        return (
            f"{where} is the home directory {home}; mount only the toolchain "
            "directory (e.g. ~/.pyenv/versions/3.11.7)"
        )
    for refused in _MOUNT_REFUSED:
        if (
            real == refused
            or inside(refused, real)
            or (
                refused in ("/proc", "/sys", "/dev", "/etc", "/run", "/boot")
                and inside(real, refused)
            )
        ):
            return f"{where} resolves to {real}, which the sandbox never shows; remove it"
    if real == home or inside(home, real):
        return (
            f"{where} is the home directory {home} or contains it; mount only the "
            "toolchain directory (e.g. ~/.pyenv/versions/3.11.7)"
        )
    if inside(real, ws) or inside(ws, real):
        return (
            f"{where} resolves to {real}, which overlaps the workspace {ws}; the "
            "workspace is in the sandbox already"
        )
    parts = real.split("/")
    for secret in _MOUNT_SECRETS:
        first = secret.split("/")
        if any(parts[i : i + len(first)] == first for i in range(len(parts))) or os.path.lexists(
            os.path.join(real, secret)
        ):
            return (
                f'{where} ({real}) is or holds the secret store "{secret}" (docs/spec.md §8.3); '
                "mount a directory without secrets"
            )
    return None


def venv_problem(entry: str, root: Path | str) -> str | None:
    """Why ``exec.venv`` cannot be the project's virtualenv, or None. Relative to the
    project root; outside the workspace it is bound read-only like a mount."""
    where = f'config exec.venv "{entry}"'
    path = os.path.normpath(os.path.join(str(root), os.path.expanduser(entry)))
    if not os.path.isdir(os.path.join(path, "bin")):
        return (
            f"{where} is not a virtualenv (no {os.path.join(entry, 'bin')} under "
            f"{root}); create it (python3 -m venv {entry}) or fix the path"
        )
    real, base = os.path.realpath(path), os.path.realpath(str(root))
    if real != base and not real.startswith(base.rstrip("/") + "/"):
        why = mount_problem(real, root)
        if why:
            return f"{where}: {why}"
    return None
