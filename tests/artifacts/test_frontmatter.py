"""split(): docs/spec.md §2 exactly, with file line numbers."""

from __future__ import annotations

from pathlib import Path

from harness.artifacts.frontmatter import MAX_FRONTMATTER_BYTES, split


def test_mapping_body_and_positions() -> None:
    text = (
        "---\ndescription: x\nparameters:\n  path: {type: string}\nscript: |\n"
        "    def run(args):\n        return 1\nwhen: 'a'\n---\n\n\nBody\n\nmore\n\n"
    )
    data, body, lines, problems = split(text, ".harness/tools/x.md")
    assert problems == []
    assert data["script"] == "def run(args):\n    return 1\n"
    assert body == "Body\n\nmore"
    assert lines["parameters"] == 3 and dict(lines)["script"] == 5
    assert lines.key(("parameters", "path", "type")) == (4, 10)
    assert lines.value(("script",)) == (6, 5)  # block scalar: next line, its indentation
    assert lines.value(("when",)) == (8, 8)  # quoted: after the quote
    assert lines.value(("description",)) == (2, 14)


def test_bom_crlf_and_trailing_spaces_on_delimiters() -> None:
    data, body, _, problems = split("\ufeff---  \r\na: 1\r\n---\t\r\nhi\r\n".encode(), "t.md")
    assert (data, body, problems) == ({"a": 1}, "hi", [])


def test_empty_frontmatter_is_empty_mapping() -> None:
    assert split("---\n---\n", "t.md")[:2] == ({}, "")
    assert split("---\n# only a comment\n---\nx", "t.md")[:2] == ({}, "x")


def test_missing_and_unclosed_delimiters() -> None:
    for text in ("", "\n---\n---\n", " ---\n---\n", "----\n---\n"):
        (problem,) = split(text, "d/NAME.md")[3]
        assert problem.message.startswith(
            "parse tool NAME.md: missing --- frontmatter delimiter on line 1"
        )
    (problem,) = split("---\na: 1\n--- x\n", "NAME.md", "hook")[3]
    assert problem.message.startswith("parse hook NAME.md: no closing --- delimiter")


def test_yaml_error_names_the_file_line() -> None:
    (problem,) = split("---\na: 1\nb: 2\nc: [1, 2\nd: 4\n---\n", "NAME.md")[3]
    assert problem.code == "yaml-syntax"
    assert problem.message.startswith(f"parse tool NAME.md: yaml: line {problem.line}: ")
    assert problem.line in (5, 6)
    (problem,) = split("---\na: 1\n  b: 2\n---\n", "NAME.md")[3]
    assert problem.line == 3 and "yaml: line 3:" in problem.message


def test_anchors_aliases_and_tags_are_rejected() -> None:
    bomb = "---\na: &a [1, 1]\nb: &b [*a, *a]\nc: &c [*b, *b]\n---\n"
    (problem,) = split(bomb, "t.md")[3]
    assert (problem.code, problem.line) == ("yaml-alias", 2)
    (problem,) = split("---\na: *nope\n---\n", "t.md")[3]
    assert problem.code == "yaml-alias"
    for tag in ("!!binary aGk=", "!!set {a}", "!!python/object:os.system x", "!custom 1"):
        (problem,) = split(f"---\na: 1\nb: {tag}\n---\n", "t.md")[3]
        assert (problem.code, problem.line) == ("yaml-value", 3), problem
    (problem,) = split("---\n<<: {a: 1}\n---\n", "t.md")[3]
    assert "merge keys" in problem.message


def test_values_are_json_like() -> None:
    data = split("---\nd: 2024-01-01\nn: 0x1f\nf: 1.5\nb: yes\nz: ~\no: 010\n---\n", "t.md")[0]
    assert data == {"d": "2024-01-01", "n": 31, "f": 1.5, "b": True, "z": None, "o": 8}


def test_size_cap(tmp_path: Path) -> None:
    path = tmp_path / "big.md"
    path.write_text("---\nscript: |\n" + "  x = 1\n" * (MAX_FRONTMATTER_BYTES // 8 + 10) + "---\n")
    (problem,) = split(path.read_bytes(), "big.md")[3]
    assert problem.code == "frontmatter-too-large" and "256 KiB" in problem.message
    ok = "---\nscript: |\n" + "  x = 1\n" * (MAX_FRONTMATTER_BYTES // 8 - 10) + "---\n"
    assert split(ok, "ok.md")[3] == []


def test_invalid_utf8_names_the_offset() -> None:
    (problem,) = split(b"---\na: 1\nb: \xc3\x28\n---\n", "t.md")[3]
    assert problem.code == "encoding-invalid"
    assert "byte offset 12" in problem.message and problem.line == 3


def test_deep_nesting_is_refused_without_crashing() -> None:
    # The same finding whichever refuses first: our event scan, or PyYAML's own scanner
    # (6.0.4 and newer refuse deep flow nesting themselves).
    for text, line in (
        ("---\na: " + "[" * 100_000 + "]" * 100_000 + "\n---\n", 2),
        ("---\na: " + "{a: " * 5000 + "}" * 5000 + "\n---\n", 2),
        ("---\na:\n" + "".join("  " * i + "- \n" for i in range(1, 400)) + "---\n", 202),
    ):
        (problem,) = split(text, "t.md")[3]
        assert (problem.code, problem.line) == ("yaml-too-deep", line), problem
        assert "nest deeper than" in problem.message and "t.md" in problem.message


def test_non_mapping_frontmatter() -> None:
    for text, what in (("---\n- 1\n---\n", "list"), ("---\njust text\n---\n", "string")):
        (problem,) = split(text, "t.md")[3]
        assert problem.code == "frontmatter-not-mapping" and f"got a {what}" in problem.message
