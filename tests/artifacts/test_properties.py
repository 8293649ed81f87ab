"""Property tests: arbitrary bytes and YAML-ish text give problems, never exceptions or hangs."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.artifacts.frontmatter import split
from harness.artifacts.loader import load_project
from harness.artifacts.model import Problem
from harness.validation import check_project

SETTINGS = settings(
    max_examples=150,
    deadline=2000,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

YAML_BITS = st.sampled_from(
    [
        "---",
        "--- ",
        "\n",
        "\r\n",
        "  ",
        "- ",
        ": ",
        "a: ",
        "script: |\n  ",
        "parameters:\n  x:\n    ",
        "type: string",
        "&a ",
        "*a",
        "!!binary ",
        "!!python/object:os.system ",
        "[",
        "]",
        "{",
        "}",
        "'",
        '"',
        "#",
        "?",
        "|",
        ">",
        "%YAML 1.1\n",
        "tools:\n  - name: x\n",
        "event: tool.pre",
        "\ufeff",
        "\t",
        "<<: ",
        "def run(args):\n    return fs.read(1)\n",
        "timeout_ms: -1",
        "2024-01-01",
    ]
)
YAMLISH = st.lists(st.one_of(YAML_BITS, st.text(max_size=8)), max_size=40).map("".join)


# Deep nesting shapes (block and flow) that used to crash the C composer.
DEEP = st.builds(
    lambda prefix, shape, n, tail: prefix + shape * n + tail,
    st.sampled_from(["x:\n", "", "- ", "tools:\n  - ", "x: ", "? "]),
    st.sampled_from(["- ", "? ", "- ? ", "? - ", "[", "{a: ", "[{a: ", "- [", "-  ", "-\t"]),
    st.integers(min_value=150, max_value=60_000),
    st.sampled_from(["", "1", "\n", "]", "}"]),
)


def _check(problems: list[Problem]) -> None:
    for p in problems:
        assert isinstance(p, Problem) and p.code and p.message
        assert p.severity in ("error", "warning")


@SETTINGS
@given(st.binary(max_size=2000))
def test_split_arbitrary_bytes(data: bytes) -> None:
    mapping, body, _lines, problems = split(data, "x.md")
    assert isinstance(mapping, dict) and isinstance(body, str)
    _check(problems)


@SETTINGS
@given(YAMLISH)
def test_split_yamlish_frontmatter(text: str) -> None:
    mapping, _body, _lines, problems = split("---\n" + text + "\n---\nbody", "x.md")
    assert isinstance(mapping, dict)
    _check(problems)


@SETTINGS
@given(tool=YAMLISH, hook=YAMLISH, config=YAMLISH, bundle=YAMLISH)
def test_load_and_check_never_raise(tool: str, hook: str, config: str, bundle: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for rel, text in (
            (".harness/tools/t.md", tool),
            (".harness/hooks/h.md", hook),
            ("harness.md", config),
            (".harness/plugins/p.md", bundle),
        ):
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(
                "---\n" + text + "\n---\n", encoding="utf-8", errors="surrogatepass"
            ) if "\ud800" not in text else path.write_bytes(b"---\n\xff\n---\n")
        project = load_project(root)
        _check(list(project.problems))
        checked = check_project(root, strict=True)
        _check(list(checked.problems))


@settings(SETTINGS, max_examples=60)
@given(DEEP)
def test_deep_nesting_never_crashes(text: str) -> None:
    mapping, _body, _lines, problems = split("---\n" + text + "\n---\nbody", "x.md")
    assert isinstance(mapping, dict)
    _check(problems)


@settings(SETTINGS, max_examples=60)
@given(YAMLISH, DEEP)
def test_deep_nesting_inside_other_yaml_never_crashes(head: str, deep: str) -> None:
    mapping, _body, _lines, problems = split("---\n" + head + deep + "\n---\n", "x.md")
    assert isinstance(mapping, dict)
    _check(problems)
