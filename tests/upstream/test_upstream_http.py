"""The SDK server over streamable HTTP, through the pipeline."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from upstream_helpers import INPROCESS, start_http_server

REDACT = """---
event: tool.post
when: payload["name"].startswith("web.")
script: |
  def handle(event, payload):
      r = payload["result"]
      s = r if type(r) == "string" else json.encode(r)
      return modify({"result": re.sub("sk-live-[0-9A-Za-z]+", "[REDACTED]", s)})
---
"""


@pytest.fixture
def http_url(tmp_path: Path) -> Iterator[str]:
    proc, url = start_http_server(tmp_path / "http-503.marker")
    yield url
    proc.terminate()  # type: ignore[attr-defined]
    proc.wait(10)  # type: ignore[attr-defined]


def test_http_server_tools_and_calls(tmp_path: Path, make, http_url: str) -> None:
    h = make(tmp_path / "p", {"web": {"url": http_url}}, config=INPROCESS)
    assert {"web.echo", "web.add", "web.header"} <= set(h.connect_tools())
    assert h.call("web.add", {"a": 20, "b": 22}).value == {"sum": 42}
    bad = h.call("web.add", {"a": 1})
    assert bad.error == 'invalid arguments for tool "web.add": $.b: "b" is a required property'
    err = h.call("web.fail", {"reason": "http"})
    assert err.is_error and "failing on purpose: http" in err.error


def test_http_headers_take_env_values(tmp_path: Path, make, http_url: str, monkeypatch) -> None:
    monkeypatch.setenv("UP_HTTP_TOKEN", "tok-123")
    h = make(
        tmp_path / "p",
        {
            "web": {
                "url": http_url,
                "headers": {"X-Token": "${env:UP_HTTP_TOKEN}", "X-Fixed": "plain"},
            }
        },
        config=INPROCESS,
    )
    assert h.call("web.header", {"name": "X-Token"}).value == {"result": "tok-123"}
    assert h.call("web.header", {"name": "X-Fixed"}).value == {"result": "plain"}


def test_http_redaction_and_spill(tmp_path: Path, make, http_url: str) -> None:
    h = make(tmp_path / "p", {"web": {"url": http_url}}, hooks={"redact": REDACT}, config=INPROCESS)
    assert "[REDACTED]" in h.call("web.secret", {}).text
    big = h.call("web.big", {"kb": 100})
    assert big.truncated and 'read_output(ref="' in big.text


def test_http_5xx_is_retried_by_policy(tmp_path: Path, make, http_url: str) -> None:
    marker = tmp_path / "http-503.marker"
    h = make(
        tmp_path / "p",
        {
            "web": {
                "url": http_url,
                "retry": {"max_attempts": 2, "retry_on": ["5xx"], "backoff_ms": 10},
            }
        },
        config=INPROCESS,
    )
    r = h.call("web.flaky_http", {})
    assert marker.exists()  # the first attempt got the 503
    assert not r.is_error, r.error
    assert r.value == {"result": "ok after 503"}


def test_http_5xx_without_retry_is_an_error_result(tmp_path: Path, make, http_url: str) -> None:
    h = make(tmp_path / "p", {"web": {"url": http_url}}, config=INPROCESS)
    r = h.call("web.flaky_http", {})
    assert r.is_error and "503" in r.error
    assert h.call("web.flaky_http", {}).value == {"result": "ok after 503"}


def test_unreachable_http_server_is_an_error_result(tmp_path: Path, make) -> None:
    from upstream_helpers import free_port

    url = f"http://127.0.0.1:{free_port()}/mcp"
    h = make(tmp_path / "p", {"web": {"url": url}}, config=INPROCESS)
    r = h.call("web.echo", {"text": "x"})
    assert r.is_error and r.error.startswith('upstream server "web" could not be started: ')
