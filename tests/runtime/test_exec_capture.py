"""``exec.run`` captures up to ``exec.max_capture_bytes`` (not the model-facing
``limits.max_output_bytes``), and ``read_output`` pages through all of it (issue 25).

Real tools, real processes, real bubblewrap where the machine has it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import harness
from harness.runtime import sandbox

_bwrap, _flags, _why = sandbox.status()
MODES = [
    pytest.param("required", marks=pytest.mark.skipif(_flags is None, reason=str(_why))),
    "off",
]

TOOL = """---
script: |
  def run(args):
      code = "import sys; sys.stdout.write(''.join('%05d\\\\n' % i for i in range(4500)))"
      return exec.run("python3", args = ["-c", code])
---
Prints 27,000 bytes.
"""


def _project(root: Path, mode: str, extra: str = "") -> Path:
    (root / ".harness" / "tools").mkdir(parents=True)
    (root / "harness.md").write_text(
        f"---\nlimits:\n  max_output_bytes: 4096\nexec:\n  sandbox: {mode}\n{extra}---\n"
    )
    (root / ".harness" / "tools" / "lines.md").write_text(TOOL)
    return root


def _read_all(h: harness.Harness, text: str) -> str:
    ref = text.split('read_output(ref="')[1].split('"')[0]
    offset, pages = 0, []
    for _ in range(100):
        page = h.call("read_output", {"ref": ref, "offset": offset})
        assert not page.is_error, page.text
        body, _, footer = page.text.rpartition("\n[read_output ")
        pages.append(body)
        if "end of output" in footer:
            return "".join(pages)
        offset = int(footer.split("offset=")[1].split(")")[0])
    raise AssertionError("read_output never reached the end")


@pytest.mark.parametrize("mode", MODES)
def test_read_output_pages_the_whole_command_output(tmp_path: Path, mode: str) -> None:
    with harness.load(_project(tmp_path, mode)) as h:
        r = h.call("lines", {})
        assert not r.is_error and r.truncated
        full = json.loads(_read_all(h, r.text))
    stdout = full["stdout"]
    assert len(stdout) == 27000 and full["truncated"] is False
    assert stdout.splitlines()[-1] == "04499"


def test_capture_has_its_own_bound(tmp_path: Path) -> None:
    with harness.load(_project(tmp_path, "off", "  max_capture_bytes: 10000\n")) as h:
        assert h.config.exec.max_capture_bytes == 10000
        r = h.call("lines", {})
        full = json.loads(_read_all(h, r.text))
    assert full["truncated"] is True and len(full["stdout"]) == 10000


def test_default_capture_bound_is_16_mib(tmp_path: Path) -> None:
    assert harness.load(_project(tmp_path, "off")).config.exec.max_capture_bytes == 16 << 20
