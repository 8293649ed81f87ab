"""The cached upstream tool listing (harness/upstream/listing_cache.py) is untrusted input.

Nothing a sandboxed process writes may change what harness loads: a sandboxed upstream
server cannot write the cache. A poisoned cache file (written by anything else) never
adds a tool the declaration filters out, never offers a schema validation refuses, is
never followed through a symbolic link, and never decides how a call is validated:
calls use the listing the started server gives."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "upstream"))

from upstream_helpers import INPROCESS, sdk, write_project  # noqa: E402

import harness  # noqa: E402
from harness.upstream import listing_cache  # noqa: E402


def warm(tmp_path: Path, **settings: object) -> tuple[Path, Path]:
    """A project declaring the SDK test server, its listing cached: (root, cache file)."""
    root = write_project(
        tmp_path / "proj", {"sdk": sdk(tmp_path.name, **settings)}, config=INPROCESS
    )
    with harness.load(root) as h:
        assert "sdk.echo" in h.connect_tools()
    path = root / ".harness" / "state" / "upstream" / "sdk.json"
    assert path.exists()
    return root, path


def poison(path: Path, edit: object) -> None:
    data = json.loads(path.read_text())
    edit(data)  # type: ignore[operator]
    path.write_text(json.dumps(data))


def cached_names(root: Path) -> set[str]:
    project = harness.load(root).project
    spec = project.servers["sdk"]
    entry = listing_cache.read(spec, project.config)
    return set() if entry is None else set(entry.listing.specs)


def test_a_sandboxed_server_cannot_write_the_cache(tmp_path: Path) -> None:
    root, path = warm(tmp_path, sandbox="required")
    before = path.read_bytes()
    with harness.load(root) as h:
        r = h.call("sdk.write_once", {"marker": str(path)})
        assert r.is_error
        r = h.call("sdk.write_once", {"marker": str(path.parent / "evil.json")})
        assert r.is_error
    assert path.read_bytes() == before
    assert not (path.parent / "evil.json").exists()


def test_a_poisoned_cache_cannot_add_a_tool_the_declaration_filters_out(
    tmp_path: Path,
) -> None:
    root, path = warm(tmp_path, tools={"deny": ["secret"]})
    extra = {"name": "secret", "inputSchema": {"type": "object"}}
    bad_name = {"name": "no spaces allowed", "inputSchema": {"type": "object"}}
    poison(path, lambda d: d["tools"].extend([extra, bad_name]))
    names = cached_names(root)
    assert "sdk.echo" in names
    assert "sdk.secret" not in names and not any(" " in n for n in names)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"s": {"type": "string", "pattern": "(?=a)a+"}}},
        {"type": "object", "properties": {"s": {"type": "strin"}}},
        {"type": "object", "properties": {"s": {"$ref": "http://example.com/x.json"}}},
    ],
    ids=["redos-pattern", "bad-type", "remote-ref"],
)
def test_a_cached_schema_validation_refuses_is_never_offered(
    tmp_path: Path, schema: dict, caplog: pytest.LogCaptureFixture
) -> None:
    root, path = warm(tmp_path)

    def edit(d: dict) -> None:
        for t in d["tools"]:
            if t["name"] == "echo":
                t["inputSchema"] = schema

    poison(path, edit)
    caplog.set_level(logging.WARNING)
    project = harness.load(root).project
    entry = listing_cache.read(project.servers["sdk"], project.config)
    if entry is not None:
        assert entry.listing.specs.get("sdk.echo") is None or (
            entry.listing.specs["sdk.echo"].input_schema != schema
        )
    else:
        assert f"the cached tool listing {path} is not used" in caplog.text


@pytest.mark.parametrize(
    "content",
    [
        b"not json",
        b"[" * 100_000,
        json.dumps({"format": 1, "key": "x", "tools": [{"name": "a"}] * 3}).encode(),
        b"\xff\xfe",
    ],
    ids=["garbage", "deep", "wrong-key", "not-utf8"],
)
def test_a_broken_cache_file_is_a_miss(tmp_path: Path, content: bytes) -> None:
    root, path = warm(tmp_path)
    path.write_bytes(content)
    assert cached_names(root) == set()
    with harness.load(root) as h:  # listing starts the server, as without a cache
        assert "sdk.echo" in h.connect_tools()
    assert "sdk.echo" in cached_names(root)  # and rewrites the entry


def test_a_cache_file_that_is_a_symlink_is_not_followed(tmp_path: Path) -> None:
    root, path = warm(tmp_path)
    elsewhere = tmp_path / "planted.json"
    elsewhere.write_bytes(path.read_bytes())
    path.unlink()
    path.symlink_to(elsewhere)
    assert cached_names(root) == set()


def test_a_call_is_validated_against_the_live_schema_not_the_cached_one(
    tmp_path: Path,
) -> None:
    root, path = warm(tmp_path)

    def loosen(d: dict) -> None:
        for t in d["tools"]:
            if t["name"] == "echo":
                t["inputSchema"] = {"type": "object", "properties": {"text": {"type": "integer"}}}

    poison(path, loosen)
    with harness.load(root) as h:
        assert h.tools["sdk.echo"].input_schema["properties"]["text"]["type"] == "integer"
        bad = h.call("sdk.echo", {"text": 5})
        assert bad.is_error and '$.text: 5 is not of type "string"' in (bad.error or "")
        assert h.call("sdk.echo", {"text": "ok"}).value == {"result": "ok"}
    # The server was started by the call: its real listing replaced the poisoned one.
    assert json.loads(path.read_text())["tools"][0]["inputSchema"] != {
        "type": "object",
        "properties": {"text": {"type": "integer"}},
    }
