"""The guard corpus (issue 23): hook files written the way ai-harness users (``o_*``) and
new users (``n_*``) write them. Each one either works at run time — through the real
pipeline, real Starlark and, for agent-loop events, a real ``Harness.run`` against the
fake model server — or fails ``harness validate`` naming the file. No file may be both
validate-clean and ineffective.

Each file's body holds one ``case: {...}`` line (JSON):

- ``expect``: ``works`` or ``refused`` (what this corpus promises for the file: a
  refused file must have a validate error of ``code`` naming it; a working file must
  validate clean and have its effect);
- the scenario: ``call: [tool, args]`` (a tool call), ``run: prompt`` with ``replies``
  (model texts, in order), ``session: true`` (a fresh session and one call), ``files``
  (created in the workspace first), ``meta: true`` (meta.tool_register enabled);
- ``effect``: ``blocked`` (blocked_by names the hook / the run fails naming it),
  ``continued`` (agent.stop: the model is asked again with the reason), ``refused``
  (every call of the session fails), ``text`` (the result or answer contains ``has``
  and not ``lacks``), ``sent`` (the model was sent ``has``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

import harness
from harness.agent import AgentError
from harness.artifacts.model import Problem
from harness.testing import FakeModelServer, Reply

HERE = Path(__file__).parent
CORPUS = sorted((HERE / "corpus").glob("*.md"))
TOOLS = HERE / "tools"
KEY = "sk-corpus-not-a-real-key"


def case_of(path: Path) -> dict[str, Any]:
    lines = [line for line in path.read_text().splitlines() if line.startswith("case: ")]
    assert len(lines) == 1, f"{path.name}: needs exactly one `case: {{...}}` line"
    case: dict[str, Any] = json.loads(lines[0].removeprefix("case: "))
    assert case["expect"] in ("works", "refused"), path.name
    return case


def project(tmp: Path, hook: Path, case: dict[str, Any]) -> Path:
    root = tmp / "p"
    shutil.copytree(TOOLS, root / ".harness" / "tools")
    (root / ".harness" / "hooks").mkdir(parents=True)
    shutil.copy(hook, root / ".harness" / "hooks" / hook.name)
    meta = "meta: {enabled: true}\n" if case.get("meta") else ""
    (root / "harness.md").write_text(
        "---\nmodel: {provider: openai, name: fake-model, api_key_env: CORPUS_KEY}\n"
        f"runtime: {{isolation: inprocess}}\nlimits: {{max_tool_calls_per_turn: 3}}\n{meta}"
        "---\nYou help.\n"
    )
    for name, text in case.get("files", {}).items():
        (root / name).write_text(text)
    return root


def validate_errors(root: Path, rel: str) -> list[Problem]:
    return [p for p in harness.check(root) if p.severity == "error" and p.path == rel]


@pytest.mark.parametrize("hook", CORPUS, ids=[p.stem for p in CORPUS])
def test_guard_works_or_fails_validate_naming_the_file(hook: Path, tmp_path: Path) -> None:
    judge(hook, tmp_path)


def test_a_clean_guard_that_does_nothing_fails_the_judgement(tmp_path: Path) -> None:
    """The judgement can fail: a validate-clean guard that never blocks is caught."""
    useless = tmp_path / "useless.md"
    useless.write_text(
        '---\nevent: tool.pre\nwhen: payload["name"] == "run_command"\nscript: |\n'
        "  def handle(event, payload):\n"
        '      if payload["arguments"]["command"] == "never this":\n'
        '          return block("no")\n'
        "      return allow()\n---\nx\n\n"
        'case: {"expect": "works", "call": ["run_command", {"command": "rm -rf /"}], '
        '"effect": "blocked"}\n'
    )
    with pytest.raises(AssertionError):
        judge(useless, tmp_path / "run")
    refused = tmp_path / "refused.md"
    refused.write_text(useless.read_text().replace('"expect": "works"', '"expect": "refused"'))
    with pytest.raises(AssertionError, match="validates clean"):
        judge(refused, tmp_path / "run2")


def judge(hook: Path, tmp_path: Path) -> None:
    """Works at run time, or fails validate naming the file (as its case line says)."""
    case = case_of(hook)
    root = project(tmp_path, hook, case)
    rel = f".harness/hooks/{hook.name}"
    errors = validate_errors(root, rel)
    every = [p.render() for p in harness.check(root) if p.severity == "error"]
    if case["expect"] == "refused":
        assert errors, f"{hook.name} validates clean; the corpus says validate refuses it"
        codes = {p.code for p in errors}
        assert case["code"] in codes, [p.render() for p in errors]
        return
    assert not every, f"{hook.name} should validate clean: {every}"
    name = hook.stem
    effect = case["effect"]
    if "call" in case or case.get("session"):
        check_call(root, name, case, effect)
    else:
        check_run(root, name, case, effect)


def check_call(root: Path, name: str, case: dict[str, Any], effect: str) -> None:
    tool, args = case.get("call", ["echo", {"text": "hi"}])
    with harness.load(root) as h, h.session() as session:
        result = session.call(tool, args)
    if effect == "blocked":
        assert result.is_error and name in result.text, result
    elif effect == "refused":
        assert result.is_error and result.text.startswith("session refused"), result
        assert result.blocked_by == name and case["reason"] in result.text, result
    elif effect == "text":
        assert not result.is_error, result
        assert case.get("has", "") in result.text, result
        assert not case.get("lacks") or case["lacks"] not in result.text, result
    else:
        raise AssertionError(f"unknown effect {effect}")


def check_run(root: Path, name: str, case: dict[str, Any], effect: str) -> None:
    replies = [Reply(text=t) for t in case["replies"]]
    with FakeModelServer("openai", replies) as server, harness.load(root) as h:
        try:
            result = h.run(case["run"], base_url=server.base_url, environ={"CORPUS_KEY": KEY})
        except AgentError as exc:
            assert effect == "blocked", f"the run failed: {exc}"
            assert name in str(exc), exc
            return
        sent = json.dumps([r.body for r in server.requests])
    assert effect != "blocked", f"the run was not stopped: {result.text!r}"
    if effect == "continued":
        assert len(server.requests) >= 2 and case["reason"] in sent
        assert result.text == case["replies"][-1]
    elif effect == "text":
        assert case.get("has", "") in result.text, result.text
        assert not case.get("lacks") or case["lacks"] not in result.text, result.text
    elif effect == "sent":
        assert case["has"] in sent and case["lacks"] not in sent, sent
    else:
        raise AssertionError(f"unknown effect {effect}")


def test_the_corpus_covers_each_class_both_ways() -> None:
    cases = {p.stem: case_of(p) for p in CORPUS}
    assert len(cases) >= 40
    for prefix in ("o_", "n_"):
        kinds = {c["expect"] for n, c in cases.items() if n.startswith(prefix)}
        assert kinds == {"works", "refused"}, prefix
