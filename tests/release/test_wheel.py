"""The release artifact works on its own (issue 21, item 3).

``python -m build`` makes a wheel and an sdist from the repository's tracked files;
``twine check`` accepts both; the wheel (not the checkout) is installed into a fresh
virtual environment, and a new user's first commands run from it on a new project:
``harness init``, ``validate``, ``call``, ``test`` and ``serve`` (one MCP round trip over
stdio with the SDK's client). Missing package data (the starter pack, the JSON schemas)
cannot hide behind the editable install the rest of the suite uses.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import anyio
import pytest

ROOT = Path(__file__).resolve().parents[2]
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
LOCK = ROOT / "requirements" / "dev.txt"


def _run(*argv: str | Path, cwd: Path | None = None, timeout: float = 300) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    done = subprocess.run(
        [str(a) for a in argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, f"{argv} exited {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _tracked_copy(dest: Path) -> Path:
    """The files git tracks (what a clone has), without the checkout's build leftovers."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    for raw in filter(None, listed):
        rel = raw.decode()
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = _tracked_copy(tmp_path_factory.mktemp("src"))
    out = tmp_path_factory.mktemp("dist")
    _run(sys.executable, "-m", "build", "--outdir", out, src)
    return out


@pytest.fixture(scope="module")
def venv(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    env = tmp_path_factory.mktemp("venv")
    _run(sys.executable, "-m", "venv", env)
    (wheel,) = dist.glob("*.whl")
    # The lock as constraints: the versions the suite tested, from the package index.
    _run(env / "bin/python", "-m", "pip", "install", "--quiet", "-c", LOCK, f"{wheel}[mcp]")
    return env


def test_build_makes_a_wheel_and_an_sdist_that_twine_accepts(dist: Path) -> None:
    names = sorted(p.name for p in dist.iterdir())
    assert names == [
        f"harness_md-{VERSION}-py3-none-any.whl",
        f"harness_md-{VERSION}.tar.gz",
    ]
    out = _run(sys.executable, "-m", "twine", "check", "--strict", *sorted(dist.iterdir()))
    assert out.count("PASSED") == 2, out


def test_the_wheel_carries_the_package_data_and_nothing_else(dist: Path) -> None:
    (wheel,) = dist.glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in (
        "harness/py.typed",
        "harness/starter/harness.md",
        "harness/starter/tools/list_files.md",
        "harness/starter/hooks/secret_redactor.md",
        "harness/starter/tests/starter.md",
    ):
        assert needed in names, needed
    assert any(n.startswith("harness/schemas/") and n.endswith(".json") for n in names)
    assert not any(n.startswith(("tests/", "bench/", "docs/")) for n in names)
    (sdist,) = dist.glob("*.tar.gz")
    with tarfile.open(sdist) as tar:
        members = {m.name.split("/", 1)[1] for m in tar.getmembers() if "/" in m.name}
    assert {"pyproject.toml", "README.md", "harness/starter/harness.md"} <= members


def test_a_new_project_from_the_installed_wheel(venv: Path, tmp_path: Path) -> None:
    harness = venv / "bin" / "harness"
    # The wheel is what runs, not the checkout.
    where = _run(venv / "bin/python", "-c", "import harness; print(harness.__file__)", cwd=tmp_path)
    assert where.startswith(str(venv)), where
    assert _run(harness, "--version").strip() == f"harness, version {VERSION}"

    project = tmp_path / "proj"
    project.mkdir()
    (project / "notes.txt").write_text("one\ntwo\n")
    _run(harness, "init", project)
    assert (project / "harness.md").is_file() and (project / ".harness/tools").is_dir()
    _run(harness, "validate", "--strict", cwd=project)
    listed = json.loads(
        _run(
            harness,
            "call",
            "list_files",
            json.dumps({"path": "."}),
            "--format",
            "json",
            cwd=project,
        )
    )
    assert "notes.txt" in json.dumps(listed)
    assert "passed" in _run(harness, "test", cwd=project)

    async def round_trip() -> None:
        from mcp.client.stdio import StdioServerParameters

        params = StdioServerParameters(command=str(harness), args=["serve"], cwd=str(project))
        with anyio.fail_after(120):
            await _session(params)

    async def _session(params: object) -> None:
        from mcp import Client
        from mcp.client.stdio import stdio_client

        async with Client(stdio_client(params), mode="legacy") as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert {"read_file", "list_files"} <= names
            result = await client.call_tool("read_file", {"path": "notes.txt"})
            assert not result.is_error, result
            assert "two" in json.dumps(result.model_dump(mode="json"))

    anyio.run(round_trip)
