"""Issue 10 item 6: redaction gaps, both directions.

Secrets that reached the model (``DB_PASSWORD=hunter2``, ``export PASSWORD="x"``,
``password = 'x'``, ``MYSQL_PWD=x``, PGP private key blocks, secrets used as object
keys) are masked; text that is not a secret (``PWD=/some/path``, the ``pwd`` command)
is left alone. Every row runs through the real starter hook (a harness made by
``harness init``, real Starlark, RE2) and through the audit redactor.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

import harness
from harness.cli.main import cli
from harness.redact import RULES, redact, redact_text

M = "[REDACTED]"
PGP = (
    "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBF1x2abc\n=abcd\n"
    "-----END PGP PRIVATE KEY BLOCK-----"
)
GHP = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
AWS = "AKIAIOSFODNN7EXAMPLE"

# (text in, text out): the hook and the audit redactor agree on text.
MASKED = [
    ("DB_PASSWORD=hunter2", f"DB_PASSWORD={M}"),
    ('export PASSWORD="hunter2 with spaces"', f"export PASSWORD={M}"),
    ("password = 'hunter2'", f"password={M}"),
    ("MYSQL_PWD=hunter2", f"MYSQL_PWD={M}"),
    ("mysql.pwd: hunter2", f"mysql.pwd={M}"),
    ("APP_DB_PASSWORD: 'hunter2'", f"APP_DB_PASSWORD={M}"),
    ("GPG_PASSPHRASE=hunter2 next", f"GPG_PASSPHRASE={M} next"),
    ("pwd=hunter2", f"pwd={M}"),
    ("password=hunter2", f"password={M}"),
    ("PASSWORD: hunter2", f"PASSWORD={M}"),
    (PGP + "\ntail", f"{M}\ntail"),
    ("-----BEGIN PGP PRIVATE KEY BLOCK-----\nlQOYBF1x2abc", M),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n-----END OPENSSH PRIVATE KEY-----", M),
    ('{"db_password": "hunter2", "user": "me"}', f'{{"db_password": "{M}", "user": "me"}}'),
    ('{"MYSQL_PWD": "hunter2"}', f'{{"MYSQL_PWD": "{M}"}}'),
    ('{"client_secret": "hunter2"}', f'{{"client_secret": "{M}"}}'),
    ('{"access_token": "hunter2"}', f'{{"access_token": "{M}"}}'),
    ('{"pwd": "hunter2"}', f'{{"pwd": "{M}"}}'),
    (f"key {AWS} and {GHP}", f"key {M} and {M}"),
]
# Not secrets: must come back unchanged.
KEPT = [
    "PWD=/some/path",
    "OLDPWD=/home/user/src",
    "PWD=~/src",
    "$ cd src && pwd\n/work/src",
    "echo pwd",
    "pwd: /work/src",
    "pwd=/work/src",
    "cwd=$(pwd)",
    "pwd: command not found",
    "run pwd, then ls",
    'PASSWORD="$DB_PASSWORD"',
    "password=$PASSWORD",
    "passwordless=true",
    "the password is checked by the server",
    '{"pwd": "/home/user"}',
    '{"next_token": "abc123", "page": 2}',
    "-----BEGIN PGP PUBLIC KEY BLOCK-----\nmQINBF\n-----END PGP PUBLIC KEY BLOCK-----",
]

# (object in, hook's object out); the audit redactor masks at least as much.
OBJECTS = [
    ({"DB_PASSWORD": "hunter2", "user": "me"}, {"DB_PASSWORD": M, "user": "me"}),
    ({"MYSQL_PWD": "hunter2"}, {"MYSQL_PWD": M}),
    ({"PWD": "/work/src", "HOME": "/root"}, {"PWD": "/work/src", "HOME": "/root"}),
    ({"pwd": "hunter2"}, {"pwd": M}),
    ({"client_secret": "hunter2", "api-key": "k1"}, {"client_secret": M, "api-key": M}),
    ({GHP: 1, "ok": 2}, {M: 1, "ok": 2}),
    ({AWS: "a", GHP: "b", M: "c"}, {f"{M}#2": "a", f"{M}#3": "b", M: "c"}),
    ({"env": {"DB_PASSWORD=hunter2": True}}, {"env": {f"DB_PASSWORD={M}": True}}),
    (
        {"list": [{"PASSWORD": "x"}, "export PASSWORD='y'"]},
        {"list": [{"PASSWORD": M}, f"export PASSWORD={M}"]},
    ),
]


@pytest.fixture(scope="module")
def h(tmp_path_factory: pytest.TempPathFactory) -> Iterator[harness.Harness]:
    root = tmp_path_factory.mktemp("redact") / "ws"
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


@pytest.mark.parametrize(("text", "expected"), MASKED, ids=[r[0][:30] for r in MASKED])
def test_secrets_are_masked(h: harness.Harness, text: str, expected: str) -> None:
    assert through_hook(h, text) == expected
    assert redact_text(text) == expected
    assert "hunter2" not in json.dumps(redact({"out": text}))


@pytest.mark.parametrize("text", KEPT, ids=[t[:30] for t in KEPT])
def test_non_secrets_are_left_alone(h: harness.Harness, text: str) -> None:
    assert through_hook(h, text) == text
    assert redact_text(text) == text


@pytest.mark.parametrize(("value", "expected"), OBJECTS, ids=[str(o[0])[:30] for o in OBJECTS])
def test_objects_keys_and_values(
    h: harness.Harness, value: dict[str, object], expected: dict[str, object]
) -> None:
    assert through_hook(h, value) == expected
    audited = redact(value)
    assert audited == expected


def test_command_output_is_masked_but_pwd_kept(h: harness.Harness) -> None:
    result = h.call("run_command", {"command": "echo DB_PASSWORD=hunter2 MYSQL_PWD=x; pwd"})
    assert not result.is_error, result.error
    value = result.value
    assert "hunter2" not in json.dumps(value) and "MYSQL_PWD=x" not in json.dumps(value)
    assert f"DB_PASSWORD={M}" in value["stdout"]  # type: ignore[index]
    # The working directory printed by pwd is not a secret.
    assert value["stdout"].rstrip().splitlines()[-1].startswith("/")  # type: ignore[index]


def test_hook_copies_are_identical_and_use_the_audit_rules() -> None:
    """One owner: the hook calls the built-in (harness/redact.py's rules) and carries
    none of the rules itself, only its list of extra patterns."""
    repo = Path(__file__).resolve().parents[2]
    starter = (repo / "harness" / "starter" / "hooks" / "secret_redactor.md").read_text()
    own = (repo / ".harness" / "hooks" / "secret_redactor.md").read_text()
    assert starter == own
    assert "modify(redact(payload, rules = EXTRA_PATTERNS" in starter
    for rule in RULES:
        assert json.dumps(rule.pattern)[1:-1] not in starter, rule.name
