"""Issue 26 item 1: the one secret rule set, by format, both ways.

Every format the rules cover (docs/security.md) has rows that must be masked and
near-misses that must stay as they are. Each row runs through the audit redactor
(harness/redact.py) and through the starter ``secret_redactor`` hook of a project made
by ``harness init`` (real Starlark, the ``redact()`` built-in): one rule set, one
answer. Tokens below are made up, assembled from parts so no scanner flags this file.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

import harness
from harness.cli.main import cli
from harness.redact import RULES, redact, redact_text
from harness.runtime.reach import hook_inputs, passthrough

M = "[REDACTED]"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY"
JWT = "eyJhbGciOiJIUzI1NiJ9" + ".eyJzdWIiOiIxMjM0NTY3ODkwIn0" + ".dozjgNryP4J3jVmNHl0w5N"
ANT = "sk-ant-" + "api03-" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0UvWxYz_-AbCdEfGh"
XOXB = "xoxb-" + "123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
XOXP = "xoxp-" + "123456789012-1234567890123-1234567890123-abcdef0123456789"
GLPAT = "glpat-" + "AbCdEfGhIjKlMnOpQrSt"
OPENAI = "sk-proj-" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
STRIPE = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"
GOOGLE = "AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"
NPM = "npm_" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
HF = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEfGh"
PYPI = "pypi-AgEIcHlwaS5vcmc" + "CJGFiY2RlZjAxLTIzNDUtNjc4OS1hYmNkLWVmMDEyMzQ1Njc4OQ"
GHP = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"

# (format, text in, text out)
MASKED = [
    (
        "aws-secret-access-key",
        f"aws_secret_access_key = {AWS_SECRET}",
        f"aws_secret_access_key = {M}",
    ),
    ("aws-secret-access-key", f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}", f"AWS_SECRET_ACCESS_KEY={M}"),
    (
        "aws-secret-access-key",
        f'{{"SecretAccessKey": "{AWS_SECRET}", "Expiration": "x"}}',
        f'{{"SecretAccessKey": "{M}", "Expiration": "x"}}',
    ),
    ("aws-access-key", "id ASIAY34FZKBOKMUTVV7A here", f"id {M} here"),
    ("password", "PGPASSWORD=hunter2 psql -h db", f"PGPASSWORD={M} psql -h db"),
    ("password", "export PGPASSWORD='hunter2'", f"export PGPASSWORD={M}"),
    ("url-password", "postgres://app:hunter2@db:5432/x", f"postgres://app:{M}@db:5432/x"),
    (
        "url-password",
        "git clone https://me:hunter2@example.com/r.git",
        f"git clone https://me:{M}@example.com/r.git",
    ),
    ("url-password", "redis://:hunter2@cache:6379/0", f"redis://:{M}@cache:6379/0"),
    ("jwt", f"Authorization: Bearer {JWT}", f"Authorization: Bearer {M}"),
    ("jwt", f"token {JWT} end", f"token {M} end"),
    ("auth-header", "Authorization: Bearer abcdef0123456789ABCDEF", f"Authorization: Bearer {M}"),
    (
        "auth-header",
        "Authorization: Basic dXNlcjpodW50ZXIyaHVudGVyMg==",
        f"Authorization: Basic {M}",
    ),
    ("anthropic-key", f"ANTHROPIC_API_KEY={ANT}", f"ANTHROPIC_API_KEY={M}"),
    ("anthropic-key", f"key {ANT}.", f"key {M}."),
    ("slack-token", f"SLACK_BOT={XOXB}", f"SLACK_BOT={M}"),
    ("slack-token", f"user {XOXP}", f"user {M}"),
    (
        "slack-webhook",
        "https://hooks.slack.com/services/T0000AAAA/B0000BBBB/XXXXXXXXXXXXXXXXXXXXXXXX",
        f"https://{M}",
    ),
    ("gitlab-token", f"remote {GLPAT}", f"remote {M}"),
    ("slack-app-token", "SLACK_APP=xapp-1-A0123ABCD-1234567890123-abcdef0123", f"SLACK_APP={M}"),
    ("pypi-token", f"password = {PYPI}", f"password={M}"),
    ("pypi-token", f"upload with {PYPI} now", f"upload with {M} now"),
    ("openai-key", f"key: {OPENAI}", f"key: {M}"),
    ("stripe-key", f"stripe {STRIPE}", f"stripe {M}"),
    ("google-api-key", f"maps {GOOGLE}", f"maps {M}"),
    (
        "npm-token",
        f"//registry.npmjs.org/:_authToken={NPM}",
        f"//registry.npmjs.org/:_authToken={M}",
    ),
    ("huggingface-token", f"HF {HF}", f"HF {M}"),
    ("github-token", f"push {GHP}", f"push {M}"),
    ("credential-assignment", "CLIENT_SECRET=abcdef0123456789", f"CLIENT_SECRET={M}"),
    ("credential-assignment", 'api_key = "abcdef0123456789"', f"api_key={M}"),
    ("credential-assignment", "stripe_api_key: 'abcdef0123456789'", f"stripe_api_key={M}"),
    ("token-json", '{"refresh_token": "abc"}', f'{{"refresh_token": "{M}"}}'),
    ("password-json", '{"PGPASSWORD": "hunter2"}', f'{{"PGPASSWORD": "{M}"}}'),
]
# (format it must not be mistaken for, text that stays)
KEPT = [
    ("aws-secret-access-key", "aws_secret_access_key = $AWS_SECRET_ACCESS_KEY"),
    ("aws-secret-access-key", "the secret access key is 40 characters long"),
    ("aws-access-key", "AKIA is the prefix of AWS key ids"),
    ("aws-access-key", "AKIAIOSFODNN7EXAMPLEX1"),  # too long: not a key id
    ("password", "PGPASSWORD=$PGPASSWORD"),
    ("password", "passwordless=true"),
    ("password", "pg_password_hash column"),
    ("url-password", "https://example.com:8443/path"),
    ("url-password", "ssh://git@example.com:22/repo.git"),
    ("url-password", "git@github.com:org/repo.git"),
    ("url-password", "http://user@example.com/"),
    ("jwt", "eyJhbGciOi is how a JWT starts"),
    ("auth-header", "Authorization: Bearer <token>"),
    ("auth-header", "basic usage of the API"),
    ("auth-header", "Bearer tokens are sent in a header"),
    ("anthropic-key", "sk-ant-api03-short"),
    ("anthropic-key", "pip install scikit-learn; import sklearn as sk"),
    ("slack-token", "xoxb- tokens are bot tokens"),
    ("slack-app-token", "xapp-1 is an app-level token prefix"),
    ("pypi-token", "pypi-AgEIcHlwaS5vcmc is the start of a PyPI token"),
    ("slack-token", "xoxo-abcdefghijklmnop"),
    ("gitlab-token", "glpat-short"),
    ("openai-key", "sk-proj-short"),
    ("stripe-key", "sk_live_ is the live prefix"),
    ("google-api-key", "AIza prefix"),
    ("credential-assignment", "secret = get_secret()"),
    ("credential-assignment", "SECRET_KEY = settings.SECRET_KEY"),
    ("credential-assignment", "api_key: str"),
    ("credential-assignment", "API_KEY=short"),
    ("token-json", '{"next_token": "abc123", "page_token": "p2"}'),
    ("private-key", "-----BEGIN PUBLIC KEY-----\nMIIBIjAN\n-----END PUBLIC KEY-----"),
    ("pwd", "PWD=/work/src"),
    ("plain", "def test_redaction(self):\n    self.assertEqual(1, 1)"),
]
OBJECTS = [
    ({"PGPASSWORD": "hunter2", "HOST": "db"}, {"PGPASSWORD": M, "HOST": "db"}),
    ({"access_token": "t", "next_token": "n"}, {"access_token": M, "next_token": "n"}),
    (
        {"auth": {"token": "t"}, "headers": [f"Bearer {JWT}"]},
        {"auth": {"token": M}, "headers": [f"Bearer {M}"]},
    ),
    ({"url": "mysql://root:hunter2@db/app"}, {"url": f"mysql://root:{M}@db/app"}),
]


@pytest.fixture(scope="module")
def h(tmp_path_factory: pytest.TempPathFactory) -> Iterator[harness.Harness]:
    root = tmp_path_factory.mktemp("corpus") / "ws"
    done = CliRunner().invoke(cli, ["init", str(root)])
    assert done.exit_code == 0, done.output
    (root / ".harness" / "tools" / "emit.md").write_text(
        "---\nparameters:\n  text: {type: string}\n  obj: {type: object}\nscript: |\n"
        '  def run(args):\n      return args["text"] if "text" in args else args["obj"]\n'
        "---\nReturns its argument.\n"
    )
    with harness.load(root) as loaded:
        yield loaded


def through_hook(h: harness.Harness, value: object) -> object:
    result = h.call("emit", {"text": value} if isinstance(value, str) else {"obj": value})
    assert not result.is_error, result.error
    return result.value


def test_every_rule_has_rows_both_ways() -> None:
    names = {r.name for r in RULES}
    masked = {row[0] for row in MASKED} | {"private-key", "password-json", "pwd-json", "pwd"}
    assert names <= masked, names - masked
    assert {row[0] for row in KEPT} - {"plain"} <= names


@pytest.mark.parametrize(
    ("fmt", "text", "expected"), MASKED, ids=[f"{r[0]}:{r[1][:24]}" for r in MASKED]
)
def test_masked(h: harness.Harness, fmt: str, text: str, expected: str) -> None:
    assert redact_text(text) == expected
    assert through_hook(h, text) == expected
    assert redact_text(expected) == expected  # idempotent: the hook chain settles


@pytest.mark.parametrize(("fmt", "text"), KEPT, ids=[f"{r[0]}:{r[1][:24]}" for r in KEPT])
def test_kept(h: harness.Harness, fmt: str, text: str) -> None:
    assert redact_text(text) == text
    assert through_hook(h, text) == text


@pytest.mark.parametrize(("value", "expected"), OBJECTS, ids=[str(o[0])[:30] for o in OBJECTS])
def test_objects(h: harness.Harness, value: dict[str, object], expected: dict[str, object]) -> None:
    assert redact(value) == expected
    assert through_hook(h, value) == expected


def test_nested_results_are_masked_at_any_depth(h: harness.Harness) -> None:
    deep: object = f"x {ANT}"
    for i in range(40):
        deep = [{"level": i, "v": deep}] if i % 2 else {"k": deep}
    out = through_hook(h, {"deep": deep})
    assert ANT not in json.dumps(out) and M in json.dumps(out)
    assert redact({"deep": deep}) == out


def test_clean_values_come_back_as_the_same_object() -> None:
    value = {"matches": [{"path": "a.py", "line": 1, "text": "def test_x():"}] * 50}
    assert redact(value) is value


def test_user_extra_patterns_in_the_hook_still_apply(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    assert CliRunner().invoke(cli, ["init", str(root)]).exit_code == 0
    hook = root / ".harness" / "hooks" / "secret_redactor.md"
    text = hook.read_text()
    extra = (
        '      "\\\\bacme_[a-z0-9]{12}\\\\b",\n      ["(internal-host: )\\\\S+", "\\\\1[HOST]"],\n'
    )
    assert "  EXTRA_PATTERNS = [\n" in text
    hook.write_text(text.replace("  EXTRA_PATTERNS = [\n", "  EXTRA_PATTERNS = [\n" + extra, 1))
    (root / "notes.txt").write_text(
        "key acme_0123456789ab\ninternal-host: db7.corp\npassword=hunter2\nplain line\n"
    )
    with harness.load(root) as h:
        got = h.call("read_file", {"path": "notes.txt"})
    assert not got.is_error, got.error
    assert got.value["content"] == (  # type: ignore[index]
        f"key {M}\ninternal-host: [HOST]\npassword={M}\nplain line"
    )


def test_a_bad_extra_pattern_is_a_clear_error(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    assert CliRunner().invoke(cli, ["init", str(root)]).exit_code == 0
    hook = root / ".harness" / "hooks" / "secret_redactor.md"
    hook.write_text(
        hook.read_text().replace("  EXTRA_PATTERNS = [\n", '  EXTRA_PATTERNS = [\n      "(a",\n', 1)
    )
    (root / "a.txt").write_text("hello\n")
    with harness.load(root) as h:
        got = h.call("read_file", {"path": "a.txt"})
    assert got.is_error  # fails closed: the result is withheld, never shown unmasked
    assert "secret_redactor" in (got.error or "")
    assert re.search(r"rules\[0\].*invalid regular expression", got.error or ""), got.error


def test_the_audit_and_the_hook_share_one_rule_set() -> None:
    """The hook names no rule of its own; the built-in and the audit import the same
    compiled set."""
    from harness import audit
    from harness.runtime.builtins import redaction

    repo = Path(__file__).resolve().parents[2]
    hook = (repo / "harness" / "starter" / "hooks" / "secret_redactor.md").read_text()
    assert "redact(payload, rules = EXTRA_PATTERNS" in hook
    for rule in RULES:
        assert rule.pattern not in hook and json.dumps(rule.pattern)[1:-1] not in hook
    assert audit.redact is redact and redaction.redact is redact
    assert passthrough(hook.split("script: |\n", 1)[1].split("\n---\n", 1)[0])


def test_a_handed_over_payload_is_not_sent_to_the_script() -> None:
    """The hook chain applies the request where the payload is; the script gets none
    of it (so none is copied into Starlark or sent to a worker)."""
    script = 'def handle(e, p):\n    return modify(redact(p, keys = ["result"], rules = []))\n'
    assert hook_inputs(script).keys == frozenset()
    assert hook_inputs("def handle(e, p):\n    return modify(p)\n").keys is None


def test_a_forged_redaction_request_can_only_mask(h: harness.Harness, tmp_path: Path) -> None:
    """A script that returns the chain's internal request itself gets what redact()
    gives: the values masked, nothing else."""
    from harness.redact import REDACT_REQUEST, apply_request

    payload = {"result": {"k": f"x {ANT}"}, "error": None, "name": "t"}
    changes = apply_request(payload, {"rules": [], "keys": ["result", "name"]})
    assert changes == {"result": {"k": f"x {M}"}}
    assert REDACT_REQUEST == "__harness_redact__"


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        (
            "def handle(event, payload):\n    return modify(redact(payload, keys = ['result']))\n",
            True,
        ),
        ("def handle(e, p):\n    return modify(redact(p))\n", True),
        ("def handle(e, p):\n    log(p)\n    return modify(redact(p))\n", False),
        ("def handle(e, p):\n    x = redact(p)\n    return modify(x)\n", False),
        ("def handle(e, p):\n    return modify(redact(p['result']))\n", False),
        ("redact = lambda v: v\ndef handle(e, p):\n    return modify(redact(p))\n", False),
        ("def modify(v):\n    return v\ndef handle(e, p):\n    return modify(redact(p))\n", False),
        ("def handle(e, p):\n    return allow()\n", False),
    ],
)
def test_only_a_payload_the_script_cannot_observe_is_handed_over(
    script: str, expected: bool
) -> None:
    assert passthrough(script) is expected


def test_the_joined_scan_misses_nothing_a_string_alone_would_hit() -> None:
    """Strings are scanned joined by newlines; anchored extra rules string by string."""
    from harness.redact import compiled_extra

    cut_key = "-----BEGIN RSA PRIVATE KEY-----\nMIIEow"
    assert redact(["a", cut_key, "b"]) == ["a", M, "b"]
    assert redact({"x": ["tail", f"{XOXB}"]}) == {"x": ["tail", M]}
    anchored = compiled_extra(["^internal-[0-9]+$"])
    assert anchored is not None and not anchored.joined
    assert redact(["a", "internal-42", "b"], anchored) == ["a", M, "b"]
    free = compiled_extra(["internal-[0-9]+"])
    assert free is not None and free.joined
    assert redact(["a", "x internal-42 y"], free) == ["a", f"x {M} y"]
