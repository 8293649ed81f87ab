"""harness.runtime.jail: lexical rules, protected/sensitive tables, resolution, caching."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.config import Config, FsConfig
from harness.errors import BuiltinError, JailError
from harness.runtime import jail as jail_mod
from harness.runtime.jail import Jail, ProtectedTarget, get_jail, is_sensitive, sensitive_patterns


def _modes() -> list[bool]:
    probe = Jail(Path("/"), (), use_openat2=True)
    probe.close()
    return [True, False] if probe.mode == "openat2" else [False]


@pytest.fixture(params=_modes(), ids=lambda v: "openat2" if v else "walk")
def use_openat2(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Path]:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("A")
    yield ws
    jail_mod.clear_jails()


@pytest.fixture
def jail(ws: Path, use_openat2: bool) -> Iterator[Jail]:
    j = Jail(ws, (), use_openat2=use_openat2)
    yield j
    j.close()


def read(j: Jail, path: str) -> str:
    fd, _rel = j.open(path)
    try:
        return os.read(fd, 1000).decode()
    finally:
        os.close(fd)


# ------------------------------------------------------------------- lexical


def test_relative(jail: Jail, ws: Path) -> None:
    assert jail.relative("a.txt") == "a.txt"
    assert jail.relative(str(ws)) == ""
    assert jail.relative(str(ws) + "/") == ""
    assert jail.relative(str(ws) + "//x/y") == "x/y"
    assert jail.relative("a/../b") == "a/../b"  # left for the resolver
    for bad in (
        "..",
        "../x",
        "a/../../x",
        "/etc/passwd",
        str(ws) + "-evil",
        str(ws) + "-evil/x",
        str(ws) + "/../ws-evil",
        "/",
        str(ws.parent),
    ):
        with pytest.raises(JailError, match=f'path "{bad}" is outside the workspace'):
            jail.relative(bad)
    with pytest.raises(JailError, match=r'path "a\\0b" contains a NUL byte'):
        jail.relative("a\x00b")
    with pytest.raises(BuiltinError, match="path is empty"):
        jail.relative("")
    with pytest.raises(BuiltinError, match="path must be a string, got bytes"):
        jail.relative(b"a.txt")  # type: ignore[arg-type]


def test_absolute_paths_normalised_lexically(
    jail: Jail, ws: Path, tmp_path: Path, use_openat2: bool
) -> None:
    n = ws.name
    assert jail.relative(f"{ws}/../{n}/a.txt") == "a.txt"
    assert jail.relative(f"{ws}/../{n}") == ""
    assert jail.relative(f"{ws}/x/../../{n}/y") == "y"
    assert jail.relative(f"{ws}/../{n}/d/../x") == "d/../x"  # the inside part: the resolver's
    assert jail.relative(f"//{str(ws).lstrip('/')}/a.txt") == "a.txt"
    assert read(jail, f"{ws}/../{n}/a.txt") == "A"
    assert jail.display(f"{ws}/../{n}/./b//c") == "b/c"
    for bad in (
        f"{ws}/../{n}-evil",
        f"{ws}/..",
        f"{ws}/../{n}/../x",
        f"{ws}/../../{n}/x",
        f"{ws}/a/../../{n}-evil/x",
        f"../{n}/a.txt",
        f"{ws}/../{n}/../../../../etc",
    ):
        with pytest.raises(JailError, match=f'path "{bad}" is outside the workspace'):
            jail.relative(bad)
    # the workspace reached through a symlink: either spelling normalises inside
    os.symlink(ws, tmp_path / "alias")
    j = Jail(tmp_path / "alias", (), use_openat2=use_openat2)
    try:
        assert j.relative(f"{tmp_path}/alias/../{n}/a.txt") == "a.txt"
        assert j.relative(f"{tmp_path}/{n}/../alias/a.txt") == "a.txt"
    finally:
        j.close()


def test_display(jail: Jail, ws: Path) -> None:
    assert jail.display(".") == "."
    assert jail.display(str(ws)) == "."
    assert jail.display("./a//b/") == "a/b"
    assert jail.display(str(ws / "x" / "y.txt")) == "x/y.txt"


def test_workspace_reached_through_a_symlink(tmp_path: Path, ws: Path, use_openat2: bool) -> None:
    os.symlink(ws, tmp_path / "alias")
    j = Jail(tmp_path / "alias", (), use_openat2=use_openat2)
    try:
        assert read(j, str(tmp_path / "alias" / "a.txt")) == "A"
        assert read(j, str(ws / "a.txt")) == "A"  # the real path is inside too
        with pytest.raises(JailError, match="outside"):
            j.relative(str(tmp_path / "alias-evil"))
    finally:
        j.close()


# --------------------------------------------------------------------- rules


@pytest.mark.parametrize(
    "rel",
    [
        ".env",
        "x/.env",
        ".env.production",
        "a.pem",
        "b.key",
        "c.p12",
        "d.pfx",
        "id_rsa",
        "id_rsa.pub",
        "id_ed25519",
        "id_ed25519.pub",
        "id_ecdsa",
        ".netrc",
        ".npmrc",
        ".pypirc",
        ".git-credentials",
        "credentials.json",
        ".ssh",
        ".ssh/config",
        "h/.ssh/authorized_keys",
        ".aws/config",
        ".gnupg/x",
        ".kube/config",
        ".docker/config.json",
        "h/.config/gcloud/credentials.db",
        ".config/gcloud",
        "X/.Env",
        "A.PEM",
    ],
)
def test_sensitive(rel: str) -> None:
    assert is_sensitive(rel.split("/"))


@pytest.mark.parametrize(
    "rel",
    [
        ".envrc",
        "env",
        "a.pem.txt",
        "key",
        "keys/notes.md",
        "id_rs",
        "netrc",
        "credentials.yaml",
        ".docker",
        ".docker/daemon.json",
        ".config",
        ".config/git/config",
        "ssh/config",
        "aws/config",
        "",
    ],
)
def test_not_sensitive(rel: str) -> None:
    assert not is_sensitive([p for p in rel.split("/") if p])


def test_protected_rules(ws: Path) -> None:
    j = Jail(ws, ("docs/legal/", "./VERSION", "../escape", "/abs", ""))
    try:
        assert j.protected[:5] == (".harness", "harness.md", "harness.yaml", "harness.yml", ".git")
        for rel in (".harness", ".harness/tools/x.md", ".HARNESS/x"):
            with pytest.raises(JailError, match="not readable or writable"):
                j.check(rel, [rel], write=False)
        for rel in (
            "harness.md",
            ".git/config",
            "docs/legal/a.md",
            "VERSION",
            "abs/x",
            "Harness.MD",
        ):
            j.check(rel, [rel], write=False)
            with pytest.raises(JailError, match=r"is protected \(read-only\)"):
                j.check(rel, [rel], write=True)
        # anchored at the workspace root; names merely alike are fine
        for rel in (
            "sub/harness.md",
            "sub/.git/config",
            "docs/legalese.md",
            "harness.md.bak",
            ".gitignore",
            "escape",
            "VERSION2",
        ):
            j.check(rel, [rel], write=True)
        assert j.hidden(".harness/tools") and j.hidden("x/.env") and not j.hidden(".git")
    finally:
        j.close()


def test_sensitive_patterns_are_what_is_sensitive_applies() -> None:
    pats = sensitive_patterns()
    assert ".env" in pats.names and "*.pem" in pats.names and ".ssh" in pats.dirs
    assert (".docker", "config.json") in pats.sequences
    for name in pats.names:
        assert is_sensitive(["x", name.replace("*", "a")])
    for d in pats.dirs:
        assert is_sensitive([d]) and is_sensitive(["a", d, "b"])
    for seq in pats.sequences:
        assert is_sensitive(["a", *seq]) and not is_sensitive(list(seq[:-1]))


def test_protected_targets_follow_symlinks(ws: Path, use_openat2: bool) -> None:
    (ws / "config" / "harness").mkdir(parents=True)
    os.symlink("config/harness", ws / ".harness")
    (ws / "gitdir").mkdir()
    os.symlink(ws / "gitdir", ws / ".git")  # absolute, inside
    os.symlink("docs", ws / "d")  # "d/legal" leads to docs/legal, which does not exist yet
    os.symlink("loop", ws / "loop")
    os.symlink(ws.parent, ws / "up")  # leads outside: protects nothing inside
    j = Jail(ws, ("d/legal", "loop", "up/x"), use_openat2=use_openat2)
    try:
        P = ProtectedTarget
        assert set(j.protected_targets()) == {
            P(".harness", "hidden"),
            P(".harness", "link"),
            P("config/harness", "hidden"),
            P("harness.md", "readonly"),
            P("harness.yaml", "readonly"),
            P("harness.yml", "readonly"),
            P(".git", "readonly"),
            P(".git", "link"),
            P("gitdir", "readonly"),
            P("d/legal", "readonly"),
            P("d", "link"),
            P("docs/legal", "readonly"),
            P("loop", "readonly"),
            P("loop", "link"),
            P("up/x", "readonly"),
            P("up", "link"),
        }
        with pytest.raises(JailError, match="not readable or writable"):
            j.check("config/harness/x", ["config/harness/x"], write=False)
        with pytest.raises(JailError, match=r"read-only"):
            j.check("docs/legal/a", ["docs/legal/a"], write=True)
        with pytest.raises(JailError, match=r"read-only"):  # the link itself, exactly
            j.check("d", ["d"], write=True)
        j.check("d/other", ["d/other"], write=True)  # not what is under it
        j.check("docs/other", ["docs/other"], write=True)
        assert j.hidden("config/harness/tools") and not j.hidden("config")
    finally:
        j.close()


def test_protected_targets_are_cached_until_the_tree_changes(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws / "config" / "harness").mkdir(parents=True)
    (ws / "src").mkdir()
    os.symlink("config/harness", ws / ".harness")
    traces: list[int] = []
    trace_all = Jail._trace_all

    def counting(self: Jail, root: int, info: os.stat_result) -> jail_mod._Rules:
        traces.append(1)
        return trace_all(self, root, info)

    monkeypatch.setattr(Jail, "_trace_all", counting)
    j = Jail(ws, ())

    def changed(d: Path, name: str) -> None:
        """Change directory d until its change time moves (timestamps are coarse)."""
        before = os.stat(d).st_ctime_ns
        while os.stat(d).st_ctime_ns == before:
            (d / name).touch()
            (d / name).unlink()

    try:
        # not settled yet (just created): traced again on every open
        monkeypatch.setattr(jail_mod, "SETTLED_NS", 10**18)
        read(j, "a.txt")
        read(j, "a.txt")
        assert len(traces) == 2
        # settled: traced once, then reused while nothing it looked at changes
        monkeypatch.setattr(jail_mod, "SETTLED_NS", -(10**18))
        read(j, "a.txt")
        read(j, "a.txt")
        changed(ws / "src", "x")  # not looked at
        read(j, "a.txt")
        assert len(traces) == 3
        changed(ws / "config", "x")  # looked in to find config/harness
        read(j, "a.txt")
        assert len(traces) == 4
        changed(ws, "x")
        with j.locate("a.txt"):
            pass
        assert len(traces) == 5
        j.check("a.txt", ["a.txt"], write=True)  # uses the rules of the current call
        assert len(traces) == 5
    finally:
        j.close()


def test_builtin_protection_cannot_be_removed(ws: Path) -> None:
    j = Jail(ws, ())
    try:
        with pytest.raises(JailError):
            j.check(".git/x", [".git/x"], write=True)
    finally:
        j.close()


# ---------------------------------------------------------------- resolution


def test_resolves_inside_symlinks(jail: Jail, ws: Path) -> None:
    (ws / "d").mkdir()
    os.symlink("../a.txt", ws / "d" / "rel")
    os.symlink(ws / "a.txt", ws / "d" / "abs")
    os.symlink(ws / "d", ws / "dabs")
    os.symlink(".", ws / "self")
    for path, real in [
        ("d/rel", "a.txt"),
        ("d/abs", "a.txt"),
        ("dabs/rel", "a.txt"),
        ("self/self/a.txt", "a.txt"),
        ("d/../a.txt", "a.txt"),
    ]:
        fd, got = jail.open(path)
        os.close(fd)
        assert got == real, path
    fd, got = jail.open("self", jail_mod.DIR_FLAGS)
    os.close(fd)
    assert got == ""


@pytest.mark.parametrize("hops,ok", [(30, True), (45, False)])
def test_symlink_hop_limit(jail: Jail, ws: Path, hops: int, ok: bool) -> None:
    os.symlink("a.txt", ws / "l0")
    for i in range(1, hops):
        os.symlink(f"l{i - 1}", ws / f"l{i}")
    if ok:
        assert read(jail, f"l{hops - 1}") == "A"
    else:
        with pytest.raises((BuiltinError, OSError)):
            read(jail, f"l{hops - 1}")


def test_locate_follows_final_link_and_checks_it(jail: Jail, ws: Path) -> None:
    (ws / ".harness").mkdir()
    os.symlink(".harness/x", ws / "to-harness")
    os.symlink("sub/new.txt", ws / "to-new")
    with pytest.raises(JailError, match="not readable or writable"):
        jail.locate("to-harness", write=True)
    with jail.locate("to-new", create=True, write=True) as loc:
        assert (loc.name, loc.rel) == ("new.txt", "sub/new.txt")
    assert (ws / "sub").is_dir()
    with jail.locate("to-new", follow=False) as loc:
        assert (loc.name, loc.rel) == ("to-new", "to-new")
    with jail.locate(".") as loc:
        assert (loc.name, loc.rel) == ("", "")


def test_mode_selection(ws: Path) -> None:
    assert Jail(ws, (), use_openat2=False).mode == "walk"
    assert Jail(ws, ()).mode in ("openat2", "walk")


# ------------------------------------------------------------------- caching


def test_one_jail_and_one_handle_per_workspace(ws: Path) -> None:
    cfg = Config(root=ws, workspace=ws)
    j = get_jail(cfg)
    assert get_jail(Config(root=ws, workspace=ws)) is j
    assert (
        get_jail(
            Config(
                root=ws,
                workspace=ws,
                fs=FsConfig(protected=(".harness", "harness.md", ".git", "x")),
            )
        )
        is not j
    )
    read(j, "a.txt")
    fd = j._root()
    read(j, "a.txt")
    assert j._root() == fd


def test_fork_reopens_the_handle(ws: Path) -> None:
    j = get_jail(Config(root=ws, workspace=ws))
    parent_fd = j._root()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        try:
            os.close(r)
            ok = read(j, "a.txt") == "A" and j._state is not None and j._state[0] == os.getpid()
            os.write(w, b"ok" if ok else b"bad")
        finally:
            os._exit(0)
    os.close(w)
    got = os.read(r, 10)
    os.close(r)
    os.waitpid(pid, 0)
    assert got == b"ok"
    assert j._root() == parent_fd  # the parent's handle is untouched


def test_workspace_replaced_is_reopened(tmp_path: Path, ws: Path) -> None:
    j = get_jail(Config(root=ws, workspace=ws))
    assert read(j, "a.txt") == "A"
    os.rename(ws, tmp_path / "old-ws")
    ws.mkdir()
    (ws / "a.txt").write_text("new")
    assert read(j, "a.txt") == "new"
