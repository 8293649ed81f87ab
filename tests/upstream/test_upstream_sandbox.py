"""Stdio servers run in the exec.run bubblewrap sandbox (a real bwrap, real servers)."""

from __future__ import annotations

import os
import socket
import sys
import threading
from pathlib import Path

from upstream_helpers import INPROCESS, SDK_SERVER, sdk

import harness
from harness.runtime import sandbox
from harness.upstream.launch import runtime_paths


def listener() -> tuple[socket.socket, int]:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(5)

    def accept() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            conn.close()

    threading.Thread(target=accept, daemon=True).start()
    return srv, srv.getsockname()[1]


def test_bwrap_works_here() -> None:
    # The sandbox tests below mean something only with a working bubblewrap.
    bwrap, flags, why = sandbox.status()
    assert bwrap is not None and flags is not None, why


def test_sandboxed_server_cannot_read_outside_the_workspace(tmp_path: Path, make) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("host secret")
    ws = tmp_path / "ws"
    h = make(ws, {"sdk": sdk(tmp_path)}, config=INPROCESS)
    (ws / "inside.txt").write_text("workspace file")
    assert h.call("sdk.read_path", {"path": str(ws / "inside.txt")}).value == {
        "result": "workspace file"
    }
    r = h.call("sdk.read_path", {"path": str(outside / "secret.txt")})
    assert r.is_error and "No such file or directory" in r.error
    home = os.path.expanduser("~")
    r = h.call("sdk.read_path", {"path": os.path.join(home, ".bashrc")})
    assert r.is_error
    env = h.call("sdk.whoami_env", {}).value
    assert env["HOME"] == "/tmp"


def test_sandboxed_server_writes_only_the_workspace(tmp_path: Path, make) -> None:
    ws = tmp_path / "ws"
    h = make(ws, {"sdk": sdk(tmp_path)}, config=INPROCESS)
    assert h.call("sdk.write_file", {"path": "made.txt", "text": "ok"}).value == {
        "result": str(ws / "made.txt")
    }
    assert (ws / "made.txt").read_text() == "ok"
    target = tmp_path / "escaped.txt"
    r = h.call("sdk.write_file", {"path": str(target), "text": "no"})
    assert r.is_error or not target.exists()
    assert not target.exists()
    r = h.call("sdk.write_file", {"path": "harness.md", "text": "rewritten"})
    assert r.is_error and "Read-only file system" in r.error


def test_sandboxed_server_has_no_network(tmp_path: Path, make) -> None:
    srv, port = listener()
    try:
        sandboxed = make(tmp_path / "a", {"sdk": sdk(tmp_path)}, config=INPROCESS)
        r = sandboxed.call("sdk.connect", {"host": "127.0.0.1", "port": port})
        assert r.value["result"].startswith("refused:")
        # The same server with sandbox: off reaches the listener: the test can fail.
        open_ = make(tmp_path / "b", {"sdk": sdk(tmp_path, sandbox="off")}, config=INPROCESS)
        assert open_.call("sdk.connect", {"host": "127.0.0.1", "port": port}).value == {
            "result": "connected"
        }
    finally:
        srv.close()


def test_unsandboxed_server_reads_outside(tmp_path: Path, make) -> None:
    (tmp_path / "outside.txt").write_text("visible")
    h = make(tmp_path / "ws", {"sdk": sdk(tmp_path, sandbox="off")}, config=INPROCESS)
    assert h.call("sdk.read_path", {"path": str(tmp_path / "outside.txt")}).value == {
        "result": "visible"
    }


def test_runtime_paths_mount_the_interpreter_not_the_home(tmp_path: Path) -> None:
    ws = str(tmp_path)
    paths = runtime_paths(sys.executable, [SDK_SERVER], ws, os.path.expanduser("~"))
    real = os.path.realpath(sys.executable)
    # The real interpreter is reachable in the sandbox: under a mounted prefix (a pyenv
    # or other private install), or under a system directory the sandbox always has (a
    # virtualenv over /usr/bin/python3, as a normal user's usually is), never mounted twice.
    system = [r for r in sandbox.system_roots() if real.startswith(r.rstrip("/") + "/")]
    assert any(real.startswith(p + "/") for p in paths) or system, paths
    assert not any(
        p == r or p.startswith(r.rstrip("/") + "/") for p in paths for r in sandbox.system_roots()
    ), paths
    assert os.path.realpath(SDK_SERVER) in paths
    home = os.path.realpath(os.path.expanduser("~"))
    assert home not in paths and "/" not in paths
    assert not any(home.startswith(p.rstrip("/") + "/") for p in paths)
    venv = os.path.dirname(os.path.dirname(sys.executable))
    if os.path.isfile(os.path.join(venv, "pyvenv.cfg")):
        assert os.path.realpath(venv) in paths


def test_runtime_paths_of_a_virtualenv_over_a_system_interpreter(tmp_path: Path) -> None:
    # The shape of a normal user's setup (a virtualenv over /usr/bin/python3), whoever runs
    # the suite: the virtualenv is mounted, the system interpreter is already in the sandbox.
    venv = tmp_path / "home" / "proj" / ".venv"
    (venv / "bin").mkdir(parents=True)
    system_exe = os.path.realpath("/bin/sh")
    assert any(system_exe.startswith(r + "/") for r in sandbox.system_roots())
    (venv / "bin" / "python3").symlink_to(system_exe)
    (venv / "pyvenv.cfg").write_text(
        f"home = {os.path.dirname(system_exe)}\nexecutable = {system_exe}\n"
    )
    paths = runtime_paths(
        str(venv / "bin" / "python3"), [], str(tmp_path / "ws"), str(tmp_path / "home")
    )
    assert paths == [os.path.realpath(venv)]


def test_runtime_paths_do_not_mount_a_whole_home_folder(tmp_path: Path) -> None:
    home = tmp_path / "home"
    tool = home / ".local" / "bin" / "some-server"
    tool.parent.mkdir(parents=True)
    (home / ".local" / "share" / "keyrings").mkdir(parents=True)
    tool.write_text("#!/bin/sh\necho hi\n")
    tool.chmod(0o755)
    paths = runtime_paths(str(tool), [], str(tmp_path / "ws"), str(home))
    assert paths == [str(tool)]  # the program itself, not ~/.local


def test_validate_warns_about_sandbox_off_and_network_without_sandbox(tmp_path: Path) -> None:
    from upstream_helpers import write_project

    write_project(
        tmp_path,
        {
            "loose": sdk(tmp_path, sandbox="off", network={"allowed_domains": ["example.com"]}),
            "netty": sdk(tmp_path, network={"allowed_domains": ["example.com"]}),
        },
    )
    problems = harness.check(tmp_path)
    assert {(p.code, p.severity) for p in problems} == {
        ("server-unsandboxed", "warning"),
        ("server-network", "warning"),
    }
    (net,) = [p for p in problems if p.code == "server-network"]
    assert net.path == "harness.md" and "has no effect with sandbox: off" in net.message


def host_http_server() -> tuple[object, int]:
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Hello(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            body = b"hello from the host"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, httpd.server_address[1]


def test_allowed_domains_open_the_network_through_the_http_rules(tmp_path: Path, make) -> None:
    httpd, port = host_http_server()
    try:
        url = f"http://127.0.0.1:{port}/"
        opened = make(
            tmp_path / "a",
            {"sdk": sdk(tmp_path, network={"allowed_domains": [f"127.0.0.1:{port}"]})},
            config=INPROCESS,
        )
        assert opened.call("sdk.fetch", {"url": url}).value == {"result": "hello from the host"}
        # An entry without a port opens port 80 (443 for a tunnel) only.
        portless = make(
            tmp_path / "d",
            {"sdk": sdk(tmp_path, network={"allowed_domains": ["127.0.0.1"]})},
            config=INPROCESS,
        )
        r = portless.call("sdk.fetch", {"url": url})
        assert r.is_error and f'port {port} of IP address "127.0.0.1" is not allowed' in r.error
        assert f'add "127.0.0.1:{port}" to network.allowed_domains' in r.error
        # Only through the proxy: a direct connection still has no network.
        direct = opened.call("sdk.connect", {"host": "127.0.0.1", "port": port})
        assert direct.value["result"].startswith("refused:")
        other = make(
            tmp_path / "b",
            {"sdk": sdk(tmp_path, network={"allowed_domains": ["example.com"]})},
            config=INPROCESS,
        )
        r = other.call("sdk.fetch", {"url": url})
        assert r.is_error
        assert (
            'HTTP 403: upstream server "sdk": IP address "127.0.0.1" is not in '
            "network.allowed_domains"
        ) in r.error
        named = make(
            tmp_path / "c",
            {"sdk": sdk(tmp_path, network={"allowed_domains": ["*.localhost", "example.com"]})},
            config=INPROCESS,
        )
        r = named.call("sdk.fetch", {"url": f"http://localhost:{port}/"})
        assert r.is_error and "HTTP 403" in r.error
    finally:
        httpd.shutdown()


def test_sandboxed_server_cannot_create_harness_files(tmp_path: Path, make, caplog) -> None:
    ws = tmp_path / "ws"
    h = make(ws, {"sdk": sdk(tmp_path)}, config=INPROCESS)  # declared inline: no .harness/
    r = h.call("sdk.write_file", {"path": ".harness/evil.md", "text": "---\n---\n"})
    assert r.is_error and "Read-only file system" in r.error
    assert not (ws / ".harness" / "evil.md").exists()
    # .git did not exist: while the server runs it is a placeholder, an empty directory
    # mounted read-only (runtime/placeholders.py), removed when the server stops.
    r = h.call("sdk.write_file", {"path": ".git", "text": "gitdir: /elsewhere"})
    assert r.is_error and "Is a directory" in r.error
    assert (ws / ".git").is_dir() and not os.listdir(ws / ".git")
    with caplog.at_level("WARNING", logger="harness.upstream"):
        h.close()
    assert not (ws / ".git").exists()
    assert "created protected path" not in caplog.text
