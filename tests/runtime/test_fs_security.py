"""The fs built-ins from the attacker's side (docs/spec.md §8.1–8.3).

One test per vector; each asserts the docs/spec.md §8 message and that the legitimate
counterpart still works. Every test runs twice: with ``openat2`` (when the kernel has
it) and with the portable ``O_NOFOLLOW`` walk.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from harness.config import ALWAYS_PROTECTED, Config, FsConfig
from harness.errors import BuiltinError, JailError
from harness.runtime import jail as jail_mod
from harness.runtime.builtins import fs
from harness.runtime.context import CallContext

SECRET = "TOP-SECRET-OUTSIDE"
fs_list = fs.FUNCTIONS["fs.list"]


def _modes() -> list[str]:
    probe = jail_mod.Jail(Path("/"), (), use_openat2=True)
    probe.close()
    return ["openat2", "walk"] if probe.mode == "openat2" else ["walk"]


@pytest.fixture(params=_modes())
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setattr(fs, "USE_OPENAT2", request.param == "openat2")
    yield request.param
    jail_mod.clear_jails()


@pytest.fixture
def ws(tmp_path: Path, mode: str) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "inside.txt").write_text("inside")
    (ws / "harness.md").write_text("---\n---\nprompt\n")
    (ws / ".harness" / "tools").mkdir(parents=True)
    (ws / ".harness" / "tools" / "t.md").write_text("tool secret")
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("[core]\n")
    out = tmp_path / "outside"
    out.mkdir()
    (out / "secret.txt").write_text(SECRET)
    evil = tmp_path / "ws-evil"
    evil.mkdir()
    (evil / "secret.txt").write_text(SECRET)
    return ws


@pytest.fixture
def ctx(ws: Path) -> CallContext:
    return CallContext(config=Config(root=ws, workspace=ws))


def outside(p: str) -> str:
    return f'path "{p}" is outside the workspace'


def refused(fn: Callable[..., object], *args: object, match: str, **kw: object) -> None:
    with pytest.raises(JailError) as info:
        fn(*args, **kw)
    assert str(info.value) == match


def test_mode_is_what_was_asked(ctx: CallContext, mode: str) -> None:
    assert fs._jail(ctx).mode == mode


# ------------------------------------------------------------------------ escapes


def test_dotdot_escape(ctx: CallContext) -> None:
    refused(fs.read, ctx, "../outside/secret.txt", match=outside("../outside/secret.txt"))
    refused(
        fs.read, ctx, "sub/../../outside/secret.txt", match=outside("sub/../../outside/secret.txt")
    )
    refused(fs.write, ctx, "../outside/new.txt", "x", match=outside("../outside/new.txt"))
    assert not (ctx.config.workspace.parent / "outside" / "new.txt").exists()
    # counterpart: ".." that stays inside
    os.mkdir(ctx.config.workspace / "sub")
    assert fs.read(ctx, "sub/../inside.txt") == "inside"


def test_absolute_outside(ctx: CallContext, tmp_path: Path) -> None:
    p = str(tmp_path / "outside" / "secret.txt")
    refused(fs.read, ctx, p, match=outside(p))
    refused(fs.read, ctx, "/etc/passwd", match=outside("/etc/passwd"))
    refused(
        fs.write,
        ctx,
        str(tmp_path / "outside" / "w.txt"),
        "x",
        match=outside(str(tmp_path / "outside" / "w.txt")),
    )
    # counterpart: absolute inside
    assert fs.read(ctx, str(ctx.config.workspace / "inside.txt")) == "inside"
    assert fs.write(ctx, str(ctx.config.workspace / "abs.txt"), "ok")["path"] == "abs.txt"


def test_sibling_with_common_prefix(ctx: CallContext) -> None:
    evil = str(ctx.config.workspace) + "-evil/secret.txt"
    refused(fs.read, ctx, evil, match=outside(evil))
    refused(fs.exists, ctx, evil, match=outside(evil))
    refused(
        fs_list,
        ctx,
        str(ctx.config.workspace) + "-evil",
        match=outside(str(ctx.config.workspace) + "-evil"),
    )


@pytest.mark.parametrize("kind", ["relative", "absolute"])
def test_file_symlink_leaving(ctx: CallContext, tmp_path: Path, kind: str) -> None:
    ws = ctx.config.workspace
    target = (
        (tmp_path / "outside" / "secret.txt")
        if kind == "absolute"
        else Path("../outside/secret.txt")
    )
    os.symlink(target, ws / "leak")
    refused(fs.read, ctx, "leak", match=outside("leak"))
    refused(fs.stat, ctx, "leak", match=outside("leak"))
    refused(fs.exists, ctx, "leak", match=outside("leak"))
    refused(fs.write, ctx, "leak", "pwned", match=outside("leak"))
    refused(fs.append, ctx, "leak", "pwned", match=outside("leak"))
    refused(fs.edit, ctx, "leak", SECRET, "pwned", match=outside("leak"))
    assert (tmp_path / "outside" / "secret.txt").read_text() == SECRET
    assert fs.grep(ctx, "SECRET") == []
    assert "leak" not in fs.glob(ctx, "*")
    assert "leak" not in [e["name"] for e in fs_list(ctx)]
    # counterpart: a symlink (same kind) that stays inside
    inside = (ws / "inside.txt") if kind == "absolute" else Path("inside.txt")
    os.symlink(inside, ws / "ok")
    assert fs.read(ctx, "ok") == "inside"
    assert fs.stat(ctx, "ok")["is_symlink"] is True
    fs.write(ctx, "ok", "rewritten")
    assert (ws / "inside.txt").read_text() == "rewritten"
    assert os.path.islink(ws / "ok")


@pytest.mark.parametrize("kind", ["relative", "absolute"])
def test_directory_symlink_leaving(ctx: CallContext, tmp_path: Path, kind: str) -> None:
    ws = ctx.config.workspace
    target = (tmp_path / "outside") if kind == "absolute" else Path("../outside")
    os.mkdir(ws / "sub")
    os.symlink(target if kind == "absolute" else Path("..") / target, ws / "sub" / "d")
    refused(fs.read, ctx, "sub/d/secret.txt", match=outside("sub/d/secret.txt"))
    refused(fs_list, ctx, "sub/d", match=outside("sub/d"))
    refused(fs.write, ctx, "sub/d/new.txt", "x", match=outside("sub/d/new.txt"))
    refused(fs.mkdir, ctx, "sub/d/newdir", match=outside("sub/d/newdir"))
    refused(fs.remove, ctx, "sub/d/secret.txt", match=outside("sub/d/secret.txt"))
    refused(fs.grep, ctx, "SECRET", path="sub/d", match=outside("sub/d"))
    assert fs.glob(ctx, "sub/d/*") == []
    assert sorted(os.listdir(tmp_path / "outside")) == ["secret.txt"]
    # counterpart: a directory symlink that stays inside
    os.mkdir(ws / "real")
    (ws / "real" / "f.txt").write_text("in real")
    os.symlink((ws / "real") if kind == "absolute" else Path("../real"), ws / "sub" / "r")
    assert fs.read(ctx, "sub/r/f.txt") == "in real"
    fs.write(ctx, "sub/r/g.txt", "new")
    assert (ws / "real" / "g.txt").read_text() == "new"
    assert [e["name"] for e in fs_list(ctx, "sub/r")] == ["f.txt", "g.txt"]


def test_write_through_dangling_symlink_leaving(ctx: CallContext, tmp_path: Path) -> None:
    ws = ctx.config.workspace
    os.symlink(tmp_path / "outside" / "created.txt", ws / "dangling")
    refused(fs.write, ctx, "dangling", "x", match=outside("dangling"))
    refused(fs.append, ctx, "dangling", "x", match=outside("dangling"))
    assert not (tmp_path / "outside" / "created.txt").exists()
    os.symlink("made-inside.txt", ws / "dangling-in")
    fs.write(ctx, "dangling-in", "x")
    assert (ws / "made-inside.txt").read_text() == "x"


def test_proc_self_root(ctx: CallContext) -> None:
    refused(fs.read, ctx, "/proc/self/root/etc/passwd", match=outside("/proc/self/root/etc/passwd"))
    os.symlink("/proc/self/root", ctx.config.workspace / "root")
    refused(fs.read, ctx, "root/etc/passwd", match=outside("root/etc/passwd"))
    refused(fs_list, ctx, "root", match=outside("root"))


def test_proc_magic_fd_link(ctx: CallContext, tmp_path: Path) -> None:
    fd = os.open(tmp_path / "outside" / "secret.txt", os.O_RDONLY)
    try:
        os.symlink(f"/proc/self/fd/{fd}", ctx.config.workspace / "fdlink")
        refused(fs.read, ctx, "fdlink", match=outside("fdlink"))
        os.symlink(f"/proc/{os.getpid()}/cwd", ctx.config.workspace / "cwdlink")
        refused(fs.read, ctx, "cwdlink/x", match=outside("cwdlink/x"))
    finally:
        os.close(fd)


def test_nul_byte(ctx: CallContext) -> None:
    calls: list[tuple[Callable[..., object], tuple[str, ...]]] = [
        (fs.read, ()),
        (fs.write, ("x",)),
        (fs.exists, ()),
        (fs.stat, ()),
        (fs_list, ()),
        (fs.mkdir, ()),
        (fs.remove, ()),
    ]
    for fn, args in calls:
        with pytest.raises(JailError, match="contains a NUL byte"):
            fn(ctx, "inside.txt\x00../../etc/passwd", *args)
    with pytest.raises(JailError, match="NUL"):
        fs.glob(ctx, "*\x00")


def test_symlink_loop(ctx: CallContext) -> None:
    ws = ctx.config.workspace
    os.symlink("b", ws / "a")
    os.symlink("a", ws / "b")
    with pytest.raises(BuiltinError, match="too many levels of symbolic links"):
        fs.read(ctx, "a")
    with pytest.raises(BuiltinError, match="too many levels of symbolic links"):
        fs.write(ctx, "a", "x")


def test_fifo_does_not_hang(ctx: CallContext) -> None:
    os.mkfifo(ctx.config.workspace / "pipe")
    with pytest.raises(BuiltinError, match="not a regular file"):
        fs.read(ctx, "pipe")
    assert fs.grep(ctx, "x") == []


# --------------------------------------------------------------------- protected


def test_harness_dir_hidden(ctx: CallContext) -> None:
    msg = 'path ".harness/tools/t.md" is protected (not readable or writable by tools)'
    refused(fs.read, ctx, ".harness/tools/t.md", match=msg)
    refused(fs.write, ctx, ".harness/tools/t.md", "x", match=msg)
    refused(fs.edit, ctx, ".harness/tools/t.md", "tool", "x", match=msg)
    refused(fs.remove, ctx, ".harness/tools/t.md", match=msg)
    refused(fs.exists, ctx, ".harness/tools/t.md", match=msg)
    refused(
        fs_list,
        ctx,
        ".harness",
        match='path ".harness" is protected (not readable or writable by tools)',
    )
    refused(
        fs.write,
        ctx,
        ".harness/hooks/new.md",
        "x",
        match='path ".harness/hooks/new.md" is protected (not readable or writable by tools)',
    )
    assert not (ctx.config.workspace / ".harness" / "hooks").exists()
    assert ".harness" not in [e["name"] for e in fs_list(ctx)]
    assert fs.glob(ctx, ".harness/**/*") == []
    assert fs.glob(ctx, ".*") == [".git"]
    assert fs.grep(ctx, "tool secret", glob=".harness/**/*") == []
    refused(
        fs.grep,
        ctx,
        "tool",
        path=".harness",
        match='path ".harness" is protected (not readable or writable by tools)',
    )
    refused(
        fs.read,
        ctx,
        str(ctx.config.workspace / ".harness/tools/t.md"),
        match=f'path "{ctx.config.workspace}/.harness/tools/t.md" is protected '
        "(not readable or writable by tools)",
    )


@pytest.mark.parametrize(
    "path",
    [
        "harness.md",
        ".git/config",
        ".git/hooks/pre-commit",
        "./.git/config",
        "sub/../harness.md",
        ".GIT/config",
    ],
)
def test_readonly_paths(ctx: CallContext, path: str) -> None:
    os.makedirs(ctx.config.workspace / "sub", exist_ok=True)
    msg = f'path "{path}" is protected (read-only)'
    refused(fs.write, ctx, path, "x", match=msg)
    refused(fs.append, ctx, path, "x", match=msg)
    refused(fs.remove, ctx, path, match=msg)
    refused(fs.mkdir, ctx, path, match=msg)
    assert (ctx.config.workspace / "harness.md").read_text() == "---\n---\nprompt\n"
    assert not (ctx.config.workspace / ".git" / "hooks").exists()
    # counterpart: reading is allowed
    assert fs.read(ctx, "harness.md").endswith("prompt\n")
    assert fs.read(ctx, ".git/config") == "[core]\n"


def test_readonly_edit_and_recursive_remove(ctx: CallContext) -> None:
    refused(
        fs.edit,
        ctx,
        "harness.md",
        "prompt",
        "evil",
        match='path "harness.md" is protected (read-only)',
    )
    refused(fs.remove, ctx, ".git", recursive=True, match='path ".git" is protected (read-only)')
    with pytest.raises(BuiltinError, match="refusing to remove the workspace itself"):
        fs.remove(ctx, ".", recursive=True)
    assert (ctx.config.workspace / ".git" / "config").exists()


def test_symlink_into_protected(ctx: CallContext) -> None:
    ws = ctx.config.workspace
    os.symlink(".harness", ws / "h")
    os.symlink(".git/config", ws / "gitconf")
    os.symlink("harness.md", ws / "notes.md")
    refused(
        fs.read,
        ctx,
        "h/tools/t.md",
        match='path "h/tools/t.md" is protected (not readable or writable by tools)',
    )
    refused(
        fs.write,
        ctx,
        "h/tools/evil.md",
        "x",
        match='path "h/tools/evil.md" is protected (not readable or writable by tools)',
    )
    refused(fs_list, ctx, "h", match='path "h" is protected (not readable or writable by tools)')
    refused(fs.write, ctx, "gitconf", "x", match='path "gitconf" is protected (read-only)')
    refused(fs.write, ctx, "notes.md", "x", match='path "notes.md" is protected (read-only)')
    refused(
        fs.edit, ctx, "notes.md", "prompt", "x", match='path "notes.md" is protected (read-only)'
    )
    assert not (ws / ".harness" / "tools" / "evil.md").exists()
    assert "h" not in fs.glob(ctx, "*")
    assert fs.read(ctx, "notes.md").endswith("prompt\n")  # read-only is readable


def test_config_protected_additions(tmp_path: Path, ws: Path) -> None:
    cfg = Config(
        root=ws, workspace=ws, fs=FsConfig(protected=(*ALWAYS_PROTECTED, "docs/legal", "LICENSE"))
    )
    ctx = CallContext(config=cfg)
    (ws / "docs" / "legal").mkdir(parents=True)
    (ws / "docs" / "legal" / "terms.md").write_text("terms")
    (ws / "LICENSE").write_text("MIT")
    refused(
        fs.write,
        ctx,
        "docs/legal/terms.md",
        "x",
        match='path "docs/legal/terms.md" is protected (read-only)',
    )
    refused(fs.write, ctx, "LICENSE", "x", match='path "LICENSE" is protected (read-only)')
    assert fs.read(ctx, "docs/legal/terms.md") == "terms"
    fs.write(ctx, "docs/other.md", "fine")


# --------------------------------------------------------------------- sensitive

SENSITIVE = [
    ".env",
    "deep/dir/.env",
    "app/.env.local",
    "k/server.pem",
    "tls.key",
    "b.p12",
    "c.pfx",
    "id_rsa",
    "home/id_rsa.pub",
    "id_ed25519",
    "x/id_ecdsa_sk",
    ".netrc",
    "a/.npmrc",
    ".pypirc",
    "b/.git-credentials",
    "svc/credentials.json",
    "home/.ssh/config",
    ".ssh/known_hosts",
    ".aws/credentials",
    "u/.gnupg/pubring.kbx",
    ".kube/config",
    "u/.docker/config.json",
    ".config/gcloud/application_default_credentials.json",
    "Cap/.ENV",
    "KEYS/Server.PEM",
]
NOT_SENSITIVE = [
    ".envrc",
    "environment.txt",
    "keys.txt",
    "config.json",
    ".docker/other.json",
    "monkey.keyboard",
    "ssh/config",
    ".config/other/x",
    "env.example",
]


@pytest.mark.parametrize("rel", SENSITIVE)
def test_sensitive_names_anywhere(ctx: CallContext, rel: str) -> None:
    ws = ctx.config.workspace
    (ws / rel).parent.mkdir(parents=True, exist_ok=True)
    (ws / rel).write_text("API_KEY=hunter2\n")
    msg = f'path "{rel}" is a protected sensitive file'
    refused(fs.read, ctx, rel, match=msg)
    refused(fs.write, ctx, rel, "x", match=msg)
    refused(fs.append, ctx, rel, "x", match=msg)
    refused(fs.edit, ctx, rel, "hunter2", "x", match=msg)
    refused(fs.remove, ctx, rel, match=msg)
    refused(fs.stat, ctx, rel, match=msg)
    assert (ws / rel).read_text() == "API_KEY=hunter2\n"
    assert fs.grep(ctx, "hunter2", glob="**/.*") == []
    assert fs.grep(ctx, "hunter2") == []
    assert rel not in fs.glob(ctx, "**/*") + fs.glob(ctx, "**/.*") + fs.glob(ctx, ".*/**/*")
    parent = os.path.dirname(rel) or "."
    if not jail_mod.is_sensitive(parent.split("/")):
        names = [e["name"] for e in fs_list(ctx, parent)]
        assert os.path.basename(rel) not in names
    # a symlink with an innocent name does not help
    os.symlink(ws / rel, ws / "innocent.txt")
    refused(fs.read, ctx, "innocent.txt", match='path "innocent.txt" is a protected sensitive file')


def test_sensitive_directory_remove_refused(ctx: CallContext) -> None:
    ws = ctx.config.workspace
    (ws / "proj" / "cfg").mkdir(parents=True)
    (ws / "proj" / "cfg" / ".env").write_text("K=V")
    (ws / "proj" / "a.txt").write_text("a")
    refused(
        fs.remove,
        ctx,
        "proj",
        recursive=True,
        match='path "proj/cfg/.env" is a protected sensitive file',
    )
    assert (ws / "proj" / "a.txt").exists() and (ws / "proj" / "cfg" / ".env").exists()


@pytest.mark.parametrize("rel", NOT_SENSITIVE)
def test_not_sensitive_counterparts(ctx: CallContext, rel: str) -> None:
    fs.write(ctx, rel, "fine")
    assert fs.read(ctx, rel) == "fine"


# ------------------------------------------------------------------------- races

_libc = ctypes.CDLL(None, use_errno=True)
_RENAME_EXCHANGE = 2


def _exchange(a: Path, b: Path) -> None:
    """Atomically swap two names (renameat2 RENAME_EXCHANGE): never a missing moment."""
    if _libc.renameat2(-100, bytes(a), -100, bytes(b), _RENAME_EXCHANGE) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def _swapper(ws: Path, name: str, stop: threading.Event, flips: list[int]) -> None:
    """Flip ``ws/name`` between the inside file/directory and a symlink leaving."""
    while not stop.is_set():
        _exchange(ws / name, ws / ".other")
        flips[0] += 1


def _race(
    ctx: CallContext,
    name: str,
    make_inside: Callable[[Path], None],
    outside_target: str,
    attempt: Callable[[], None],
    both: bool = True,
) -> tuple[int, int]:
    ws = ctx.config.workspace
    make_inside(ws / name)
    os.symlink(outside_target, ws / ".other")
    stop, flips = threading.Event(), [0]
    t = threading.Thread(target=_swapper, args=(ws, name, stop, flips), daemon=True)
    t.start()
    ok = denied = n = 0
    try:
        # At least 500 attempts and 200 flips; keep going (up to 3000) until both outcomes
        # were seen.
        while (
            t.is_alive()
            and n < 3000
            and (n < 500 or flips[0] < 200 or (both and not (ok and denied)))
        ):
            n += 1
            try:
                attempt()
                ok += 1
            except JailError as e:
                assert "is outside the workspace" in str(e)
                denied += 1
            except BuiltinError as e:
                # The path vanished or changed kind between two flips: a clean refusal
                # from the built-in (what matters, no secret read, is checked in attempt).
                assert str(e).startswith(("fs.", "path ")), str(e)
    finally:
        stop.set()
        t.join()
    assert flips[0] >= 200, "the swapper thread stopped early"
    return ok, denied


def test_race_file_swapped_for_symlink(ctx: CallContext, tmp_path: Path) -> None:
    def inside(p: Path) -> None:
        p.write_text("inside")

    def attempt() -> None:
        assert fs.read(ctx, "victim") == "inside"  # never the secret

    ok, denied = _race(ctx, "victim", inside, str(tmp_path / "outside" / "secret.txt"), attempt)
    assert ok  # denials depend on timing; the security property is asserted in attempt()


def test_race_relative_symlink_swap(ctx: CallContext) -> None:
    def inside(p: Path) -> None:
        p.write_text("inside")

    def attempt() -> None:
        assert fs.read(ctx, "victim") == "inside"

    ok, denied = _race(ctx, "victim", inside, "../outside/secret.txt", attempt)
    assert ok  # denials depend on timing; the security property is asserted in attempt()


def test_race_directory_swapped_for_symlink(ctx: CallContext, tmp_path: Path) -> None:
    (tmp_path / "outside" / "f").write_text(SECRET)

    def inside(p: Path) -> None:
        p.mkdir()
        (p / "f").write_text("inside")

    def attempt() -> None:
        assert fs.read(ctx, "d/f") == "inside"

    ok, denied = _race(ctx, "d", inside, str(tmp_path / "outside"), attempt)
    assert ok  # denials depend on timing; the security property is asserted in attempt()


def test_race_writes_never_land_outside(ctx: CallContext, tmp_path: Path) -> None:
    secret = tmp_path / "outside" / "secret.txt"

    def inside(p: Path) -> None:
        p.write_text("inside")

    def attempt() -> None:
        fs.write(ctx, "victim", "inside")

    ok, denied = _race(ctx, "victim", inside, str(secret), attempt)
    assert ok  # denials depend on timing; the security property is asserted in attempt()
    assert secret.read_text() == SECRET
    assert sorted(os.listdir(tmp_path / "outside")) == ["secret.txt"]


def test_race_grep_and_glob_never_see_outside(ctx: CallContext, tmp_path: Path) -> None:
    def inside(p: Path) -> None:
        p.mkdir()
        (p / "f").write_text("inside")

    def attempt() -> None:
        assert all(m["text"] != SECRET for m in fs.grep(ctx, "."))
        assert all(m["text"] != SECRET for m in fs.grep(ctx, ".", order="walk"))
        assert all(not p.startswith("d/secret") for p in fs.glob(ctx, "**/*"))

    (tmp_path / "outside" / "f").write_text(SECRET)
    _race(ctx, "d", inside, str(tmp_path / "outside"), attempt, both=False)


def test_race_grep_walk_below_the_root(ctx: CallContext, tmp_path: Path) -> None:
    """fs.grep/fs.glob's walk opens each child relative to its directory handle: a
    file or directory deep in the tree swapped for a symlink leaving the workspace, or
    a .gitignore swapped for one, is never read or entered."""
    ws = ctx.config.workspace
    (ws / "sub" / "deeper").mkdir(parents=True)
    (tmp_path / "outside" / "f").write_text(SECRET)
    (tmp_path / "outside" / "ignore").write_text("*\n")

    def inside_file(p: Path) -> None:
        p.write_text("inside\n")

    def inside_dir(p: Path) -> None:
        p.mkdir()
        (p / "f").write_text("inside\n")

    def attempt() -> None:
        found = fs.grep(ctx, ".", max_matches=10000)
        found += fs.grep(ctx, ".", max_matches=10000, order="walk")
        assert all(m["text"] != SECRET for m in found)
        assert all("outside" not in p for p in fs.glob(ctx, "**/*"))

    def attempt_ignore() -> None:  # the outside "*" must never hide sub/deeper/keep
        assert fs.glob(ctx, "sub/deeper/keep") == ["sub/deeper/keep"]

    def clear(*names: str) -> None:  # the swap may have left either side anywhere
        for name in names:
            p = ws / name
            if p.is_symlink() or p.is_file():
                p.unlink()
            elif p.is_dir():
                shutil.rmtree(p)

    _race(
        ctx, "sub/deeper/victim", inside_file, str(tmp_path / "outside" / "f"), attempt, both=False
    )
    clear(".other", "sub/deeper/victim")
    _race(ctx, "sub/deeper/d", inside_dir, str(tmp_path / "outside"), attempt, both=False)
    clear(".other", "sub/deeper/d")
    (ws / "sub" / "deeper" / "keep").write_text("x")
    _race(
        ctx,
        "sub/deeper/.gitignore",
        lambda p: p.write_text("nothing\n"),
        str(tmp_path / "outside" / "ignore"),
        attempt_ignore,
        both=False,
    )


def test_race_write_below_a_directory_swapped_for_symlink(ctx: CallContext, tmp_path: Path) -> None:
    def inside(p: Path) -> None:
        p.mkdir()
        (p / "f").write_text("inside")

    def attempt() -> None:
        fs.write(ctx, "d/new.txt", "pwned")

    _race(ctx, "d", inside, str(tmp_path / "outside"), attempt)
    assert sorted(os.listdir(tmp_path / "outside")) == ["secret.txt"]


# ------------------------------------------------- protected entries that are symlinks
# Protection applies to the object, not to its spelling: when ".harness", ".git",
# "harness.md" or an fs.protected entry is itself a symlink (or lies below one), the
# place it leads to is protected the same way.

HIDDEN_MSG = 'path "{}" is protected (not readable or writable by tools)'
RO_MSG = 'path "{}" is protected (read-only)'
FSMONITOR = "[core]\n\tfsmonitor = touch /tmp/pwned\n"


def _link_protected(ws: Path) -> None:
    """ws/.harness -> config/harness and ws/.git -> gitdir, both real directories inside."""
    (ws / "config").mkdir()
    shutil.move(ws / ".harness", ws / "config" / "harness")
    os.symlink("config/harness", ws / ".harness")
    shutil.move(ws / ".git", ws / "gitdir")
    os.symlink("gitdir", ws / ".git")
    (ws / "config" / "other.txt").write_text("other")


def test_symlinked_harness_dir_target_is_hidden(ctx: CallContext) -> None:
    ws = ctx.config.workspace
    _link_protected(ws)
    p = "config/harness/tools/evil.md"
    refused(fs.write, ctx, p, "---\nscript: x\n---\n", match=HIDDEN_MSG.format(p))
    assert not (ws / "config" / "harness" / "tools" / "evil.md").exists()
    t = "config/harness/tools/t.md"
    refused(fs.read, ctx, t, match=HIDDEN_MSG.format(t))
    refused(fs.edit, ctx, t, "tool", "x", match=HIDDEN_MSG.format(t))
    refused(fs.append, ctx, t, "x", match=HIDDEN_MSG.format(t))
    refused(fs.exists, ctx, t, match=HIDDEN_MSG.format(t))
    refused(fs.stat, ctx, t, match=HIDDEN_MSG.format(t))
    refused(fs.remove, ctx, t, match=HIDDEN_MSG.format(t))
    refused(fs_list, ctx, "config/harness", match=HIDDEN_MSG.format("config/harness"))
    refused(fs.mkdir, ctx, "config/harness/hooks", match=HIDDEN_MSG.format("config/harness/hooks"))
    refused(fs.grep, ctx, "tool", path="config/harness", match=HIDDEN_MSG.format("config/harness"))
    refused(fs.remove, ctx, "config", recursive=True, match=HIDDEN_MSG.format("config/harness"))
    abs_t = str(ws / t)
    refused(fs.read, ctx, abs_t, match=HIDDEN_MSG.format(abs_t))
    # enumeration does not show it
    assert [e["name"] for e in fs_list(ctx, "config")] == ["other.txt"]
    assert fs.glob(ctx, "config/**/*") == ["config/other.txt"]
    assert fs.grep(ctx, "tool secret") == []
    assert not (ws / "config" / "harness" / "hooks").exists()
    assert (ws / "config" / "harness" / "tools" / "t.md").read_text() == "tool secret"
    # the spelling through the link stays protected; the rest of config/ is not
    refused(fs.read, ctx, ".harness/tools/t.md", match=HIDDEN_MSG.format(".harness/tools/t.md"))
    fs.write(ctx, "config/other.txt", "changed")
    assert fs.read(ctx, "config/other.txt") == "changed"


def test_symlinked_git_dir_target_is_read_only(ctx: CallContext) -> None:
    ws = ctx.config.workspace
    _link_protected(ws)
    refused(fs.write, ctx, "gitdir/config", FSMONITOR, match=RO_MSG.format("gitdir/config"))
    refused(fs.append, ctx, "gitdir/config", FSMONITOR, match=RO_MSG.format("gitdir/config"))
    refused(
        fs.edit, ctx, "gitdir/config", "[core]\n", FSMONITOR, match=RO_MSG.format("gitdir/config")
    )
    refused(
        fs.write,
        ctx,
        "gitdir/hooks/pre-commit",
        "#!/bin/sh\n",
        match=RO_MSG.format("gitdir/hooks/pre-commit"),
    )
    refused(fs.mkdir, ctx, "gitdir/hooks", match=RO_MSG.format("gitdir/hooks"))
    refused(fs.remove, ctx, "gitdir/config", match=RO_MSG.format("gitdir/config"))
    refused(fs.remove, ctx, "gitdir", recursive=True, match=RO_MSG.format("gitdir"))
    refused(fs.write, ctx, "./x/../gitdir/config", "x", match=RO_MSG.format("./x/../gitdir/config"))
    refused(fs.write, ctx, "GITDIR/config", "x", match=RO_MSG.format("GITDIR/config"))
    assert (ws / "gitdir" / "config").read_text() == "[core]\n"
    assert not (ws / "gitdir" / "hooks").exists()
    # read-only stays readable, under both spellings
    assert fs.read(ctx, "gitdir/config") == "[core]\n"
    assert fs.read(ctx, ".git/config") == "[core]\n"
    assert "gitdir/config" in fs.glob(ctx, "gitdir/*")
    # a name merely alike is not protected
    fs.write(ctx, "gitdir2/config", "fine")


def test_symlinked_harness_md_target_is_read_only(ctx: CallContext) -> None:
    ws = ctx.config.workspace
    (ws / "docs").mkdir()
    os.rename(ws / "harness.md", ws / "docs" / "prompt.md")
    os.symlink("docs/prompt.md", ws / "harness.md")
    refused(fs.write, ctx, "docs/prompt.md", "evil", match=RO_MSG.format("docs/prompt.md"))
    refused(fs.edit, ctx, "docs/prompt.md", "prompt", "evil", match=RO_MSG.format("docs/prompt.md"))
    refused(fs.remove, ctx, "docs/prompt.md", match=RO_MSG.format("docs/prompt.md"))
    refused(fs.remove, ctx, "docs", recursive=True, match=RO_MSG.format("docs/prompt.md"))
    assert fs.read(ctx, "docs/prompt.md").endswith("prompt\n")
    fs.write(ctx, "docs/prompt.md.bak", "fine")


def test_symlinked_config_protected_entries(ws: Path) -> None:
    # "legal" is a symlink; "vendor/lib" lies below a symlinked directory
    (ws / "docs" / "legal").mkdir(parents=True)
    (ws / "docs" / "legal" / "terms.md").write_text("terms")
    (ws / "third_party" / "lib").mkdir(parents=True)
    (ws / "third_party" / "lib" / "a.c").write_text("int a;")
    (ws / "third_party" / "notes.md").write_text("notes")
    os.symlink("docs/legal", ws / "legal")
    os.symlink("third_party", ws / "vendor")
    cfg = Config(
        root=ws, workspace=ws, fs=FsConfig(protected=(*ALWAYS_PROTECTED, "legal", "vendor/lib"))
    )
    ctx = CallContext(config=cfg)
    refused(fs.write, ctx, "docs/legal/terms.md", "x", match=RO_MSG.format("docs/legal/terms.md"))
    refused(fs.write, ctx, "third_party/lib/a.c", "x", match=RO_MSG.format("third_party/lib/a.c"))
    refused(fs.write, ctx, "legal/terms.md", "x", match=RO_MSG.format("legal/terms.md"))
    assert fs.read(ctx, "docs/legal/terms.md") == "terms"
    fs.write(ctx, "third_party/notes.md", "fine")
    fs.write(ctx, "docs/readme.md", "fine")


def test_links_leading_to_a_protected_entry_cannot_be_removed(ctx: CallContext) -> None:
    # .harness -> cfg -> config/harness: removing "cfg" would re-point .harness at a
    # place the next write could fill
    ws = ctx.config.workspace
    _link_protected(ws)
    os.remove(ws / ".harness")
    os.symlink("cfg", ws / ".harness")
    os.symlink("config/harness", ws / "cfg")
    refused(fs.remove, ctx, "cfg", match=RO_MSG.format("cfg"))
    refused(fs.write, ctx, "cfg", "x", match=RO_MSG.format("cfg"))
    refused(fs.read, ctx, "cfg/tools/t.md", match=HIDDEN_MSG.format("cfg/tools/t.md"))
    refused(
        fs.write,
        ctx,
        "config/harness/tools/evil.md",
        "x",
        match=HIDDEN_MSG.format("config/harness/tools/evil.md"),
    )
    assert os.path.islink(ws / "cfg")
    assert "cfg" not in fs.glob(ctx, "*")


def test_dangling_protected_symlink_target_cannot_be_created(ctx: CallContext) -> None:
    ws = ctx.config.workspace
    shutil.rmtree(ws / ".harness")
    os.symlink("config/harness", ws / ".harness")  # config/ does not exist yet
    p = "config/harness/tools/evil.md"
    refused(fs.write, ctx, p, "x", match=HIDDEN_MSG.format(p))
    refused(fs.mkdir, ctx, "config/harness", match=HIDDEN_MSG.format("config/harness"))
    assert not (ws / "config" / "harness").exists()
    fs.mkdir(ctx, "config")  # the parent is not protected
    refused(fs.write, ctx, p, "x", match=HIDDEN_MSG.format(p))
    refused(fs.write, ctx, "config/harness", "x", match=HIDDEN_MSG.format("config/harness"))
    assert os.listdir(ws / "config") == []


def test_absolute_protected_symlink_inside(ctx: CallContext, tmp_path: Path) -> None:
    ws = ctx.config.workspace
    _link_protected(ws)
    os.remove(ws / ".git")
    os.symlink(ws / "gitdir", ws / ".git")
    refused(fs.write, ctx, "gitdir/config", FSMONITOR, match=RO_MSG.format("gitdir/config"))
    # a protected entry leading outside protects nothing inside, and breaks nothing
    os.remove(ws / ".git")
    os.symlink(tmp_path / "outside", ws / ".git")
    fs.write(ctx, "gitdir/config", "now an ordinary file")
    refused(fs.read, ctx, ".git/secret.txt", match=outside(".git/secret.txt"))


def test_protection_follows_a_re_pointed_entry(
    ctx: CallContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The resolved targets are cached; a change of the tree is seen on the next call,
    also when the cache is trusted at once (no settling time)."""
    monkeypatch.setattr(jail_mod, "SETTLED_NS", 0)
    ws = ctx.config.workspace
    _link_protected(ws)
    (ws / "config" / "alt").mkdir()
    refused(
        fs.write, ctx, "config/harness/x.md", "x", match=HIDDEN_MSG.format("config/harness/x.md")
    )
    fs.write(ctx, "config/alt/x.md", "x")
    before = os.stat(ws).st_ctime_ns
    while os.stat(ws).st_ctime_ns == before:  # until the directory's change time moves
        os.remove(ws / ".harness")
        os.symlink("config/alt", ws / ".harness")
    refused(fs.write, ctx, "config/alt/x.md", "y", match=HIDDEN_MSG.format("config/alt/x.md"))
    fs.write(ctx, "config/harness/x.md", "x")  # no longer what .harness is


def test_race_write_below_a_directory_swapped_for_a_link_to_protected(ctx: CallContext) -> None:
    """A name flipping between a plain directory and a symlink to the (symlinked)
    .harness target: a write below it never lands in the protected directory."""
    ws = ctx.config.workspace
    _link_protected(ws)
    os.mkdir(ws / "d")
    os.mkdir(ws / "d" / "tools")
    os.symlink("config/harness", ws / ".other")
    stop, flips = threading.Event(), [0]
    t = threading.Thread(target=_swapper, args=(ws, "d", stop, flips), daemon=True)
    t.start()
    ok = denied = n = 0
    try:
        while t.is_alive() and n < 3000 and (n < 500 or flips[0] < 200 or not (ok and denied)):
            n += 1
            try:
                fs.write(ctx, "d/tools/evil.md", "x")
                ok += 1
            except JailError as e:
                assert str(e) == HIDDEN_MSG.format("d/tools/evil.md")
                denied += 1
            except BuiltinError as e:  # a clean refusal mid-swap
                assert str(e).startswith(("fs.", "path ")), str(e)
    finally:
        stop.set()
        t.join()
    assert flips[0] >= 200 and ok
    assert sorted(os.listdir(ws / "config" / "harness" / "tools")) == ["t.md"]


# --------------------------------------------------- absolute paths normalised lexically


def test_absolute_path_normalising_inside(ctx: CallContext, tmp_path: Path) -> None:
    ws = str(ctx.config.workspace)
    name = os.path.basename(ws)
    p = f"{ws}/../{name}/inside.txt"
    assert fs.read(ctx, p) == "inside"
    assert fs.write(ctx, f"{ws}/../{name}/new.txt", "n")["path"] == "new.txt"
    os.mkdir(f"{ws}/sub")
    assert fs.read(ctx, f"{ws}/sub/../inside.txt") == "inside"
    assert fs.exists(ctx, f"//{ws.lstrip('/')}/inside.txt")
    # real escapes stay refused, however they are spelled
    for bad in (
        f"{ws}/../{name}-evil/secret.txt",
        f"{ws}/../outside/secret.txt",
        f"{ws}/../{name}/../outside/secret.txt",
        f"{ws}/sub/../../outside/secret.txt",
        f"{ws}/..",
        f"{ws}/../{name}/../../../../etc/passwd",
    ):
        refused(fs.read, ctx, bad, match=outside(bad))
    refused(fs.write, ctx, f"{ws}/../outside/w.txt", "x", match=outside(f"{ws}/../outside/w.txt"))
    assert not (tmp_path / "outside" / "w.txt").exists()
    # relative ".." climbing above the workspace is refused as written, as before
    refused(fs.read, ctx, f"../{name}/inside.txt", match=outside(f"../{name}/inside.txt"))
    # the protected and sensitive rules apply to the normalised path
    refused(
        fs.write,
        ctx,
        f"{ws}/../{name}/.git/config",
        "x",
        match=RO_MSG.format(f"{ws}/../{name}/.git/config"),
    )
    refused(
        fs.read,
        ctx,
        f"{ws}/../{name}/.harness/tools/t.md",
        match=HIDDEN_MSG.format(f"{ws}/../{name}/.harness/tools/t.md"),
    )


@pytest.mark.parametrize("kind", ["relative", "absolute"])
def test_git_file_pointing_inside_protects_the_git_dir(ctx: CallContext, kind: str) -> None:
    """``.git`` as a file (git init --separate-git-dir, worktrees, submodules)."""
    ws = ctx.config.workspace
    shutil.move(ws / ".git", ws / "gitstore")
    target = "gitstore" if kind == "relative" else str(ws / "gitstore")
    (ws / ".git").write_text(f"gitdir: {target}\n")
    refused(fs.write, ctx, "gitstore/config", FSMONITOR, match=RO_MSG.format("gitstore/config"))
    refused(
        fs.write,
        ctx,
        "gitstore/hooks/pre-commit",
        "#!/bin/sh\n",
        match=RO_MSG.format("gitstore/hooks/pre-commit"),
    )
    refused(fs.write, ctx, ".git", "gitdir: elsewhere\n", match=RO_MSG.format(".git"))
    assert fs.read(ctx, "gitstore/config") == "[core]\n"
    assert (ws / "gitstore" / "config").read_text() == "[core]\n"
    # a .git file that is not a gitdir pointer protects only itself
    (ws / ".git").write_text("not a pointer\n")
    fs.write(ctx, "gitstore/config", "now ordinary")
