"""The tokens file: what it accepts, and a one-line error for each way it can be wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from sagaway import credentials
from sagaway.principals import ALL_ROLES, Principal, Role

DIGEST = credentials.digest("s3cret")


def _entry(name: str = "dash", roles: str = '["read"]', rest: str = "") -> str:
    return f'[[token]]\nname = "{name}"\nroles = {roles}\nsha256 = "{DIGEST}"\n{rest}'


def test_a_token_entry_names_its_principal_by_the_digest_of_its_token() -> None:
    found = credentials.parse(_entry(roles='["read", "operate"]'))
    assert found.by_token("s3cret") == Principal("dash", frozenset({Role.READ, Role.OPERATE}))
    assert found.by_token("s3cret ") is None
    assert found.by_token("") is None
    # Upper-case hex is the same digest.
    upper = credentials.parse(_entry().replace(DIGEST, DIGEST.upper()))
    assert upper.by_token("s3cret") is not None


def test_token_file_holds_the_token_itself_relative_to_the_tokens_file(tmp_path: Path) -> None:
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "w").write_text("  worker-token\n")
    path = tmp_path / "tokens.toml"
    path.write_text('[[token]]\nname = "w"\nroles = ["worker"]\ntoken_file = "secrets/w"\n')
    found = credentials.load(path)
    assert found.by_token("worker-token") == Principal("w", frozenset({Role.WORKER}))


def test_new_token_entry_round_trips() -> None:
    token = credentials.new_token()
    assert len(token) >= 43
    entry = credentials.toml_entry('we"ird\\name', [Role.ADMIN], credentials.digest(token))
    found = credentials.parse(entry)
    assert found.by_token(token) == Principal('we"ird\\name', frozenset({Role.ADMIN}))


def test_certificates_match_by_subject_or_common_name() -> None:
    found = credentials.parse(
        '[[certificate]]\nsubject = "CN=w1,O=Acme"\nroles = ["worker"]\n'
        '[[certificate]]\ncommon_name = "ops"\nroles = ["operate"]\nname = "ops-laptop"\n'
    )
    assert found.by_certificate("CN=w1,O=Acme", "w1") == Principal(
        "CN=w1,O=Acme", frozenset({Role.WORKER})
    )
    assert found.by_certificate("CN=w1", "w1") is None  # the whole subject must match
    assert found.by_certificate("CN=ops,O=Other", "ops") == Principal(
        "ops-laptop", frozenset({Role.OPERATE})
    )
    assert found.by_certificate(None, None) is None
    assert found.summary() == "0 tokens, 2 certificates"


BAD = [
    ("not toml", "[[token]\n", "not TOML"),
    ("unknown top key", '[[tokens]]\nname = "x"\n', "unknown key 'tokens'"),
    ("token not a table", 'token = "abc"\n', "write each token as a [[token]] table"),
    ("empty", "", "no [[token]] or [[certificate]] entry"),
    ("missing roles", f'[[token]]\nname = "x"\nsha256 = "{DIGEST}"\n', "missing field 'roles'"),
    ("missing name", f'[[token]]\nroles = ["read"]\nsha256 = "{DIGEST}"\n', "missing field 'name'"),
    ("unknown role", _entry(roles='["reader"]'), "unknown role 'reader' (roles are read, "),
    ("role not text", _entry(roles="[1]"), "unknown role 1"),
    ("no role", _entry(roles="[]"), "'roles' must be a non-empty list"),
    ("roles not list", _entry(roles='"read"'), "'roles' must be a non-empty list"),
    ("bad digest", _entry().replace(DIGEST, "abc"), "'sha256' must be 64 hex digits"),
    ("not hex", _entry().replace(DIGEST, "z" * 64), "'sha256' must be 64 hex digits"),
    ("no secret", '[[token]]\nname = "x"\nroles = ["read"]\n', "exactly one of 'sha256'"),
    ("both", _entry(rest='token_file = "/x"\n'), "exactly one of 'sha256'"),
    ("unknown field", _entry(rest='role = "x"\n'), "unknown field 'role'"),
    ("empty name", _entry(name=" "), "'name' must be a non-empty string"),
    ("control in name", _entry(name="a\\u001bb"), "no controls"),
    ("duplicate name", _entry() + _entry().replace(DIGEST, "0" * 64), "duplicate name 'dash'"),
    ("same token", _entry() + _entry(name="other"), "the same token as 'dash'"),
    (
        "cert subject and cn",
        '[[certificate]]\nsubject = "CN=a"\ncommon_name = "a"\nroles = ["read"]\n',
        "exactly one of 'subject' and 'common_name'",
    ),
    (
        "cert twice",
        '[[certificate]]\ncommon_name = "a"\nroles = ["read"]\n' * 2,
        "duplicate common_name 'a'",
    ),
    (
        "cert name clash",
        _entry() + '[[certificate]]\ncommon_name = "a"\nname = "dash"\nroles = ["read"]\n',
        "duplicate name 'dash'",
    ),
]


@pytest.mark.parametrize(("text", "expected"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_a_bad_tokens_file_gets_one_line_saying_what_is_wrong(text: str, expected: str) -> None:
    with pytest.raises(credentials.TokensFileError) as caught:
        credentials.parse(text, where="t.toml")
    message = str(caught.value)
    assert expected in message
    assert message.startswith("t.toml: ")
    assert "\n" not in message


def test_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(credentials.TokensFileError, match="cannot read the tokens file"):
        credentials.load(tmp_path / "missing.toml")
    path = tmp_path / "t.toml"
    path.write_text('[[token]]\nname = "w"\nroles = ["worker"]\ntoken_file = "nope"\n')
    with pytest.raises(credentials.TokensFileError, match=r"#1 \('w'\): cannot read token_file"):
        credentials.load(path)
    (tmp_path / "empty").write_text("\n")
    path.write_text('[[token]]\nname = "w"\nroles = ["worker"]\ntoken_file = "empty"\n')
    with pytest.raises(credentials.TokensFileError, match="is empty"):
        credentials.load(path)


def test_the_single_token_is_default_with_every_role_beside_the_file() -> None:
    assert credentials.combine(None, None) is None
    alone = credentials.combine(None, "t0")
    assert alone is not None and alone.by_token("t0") == Principal("default", ALL_ROLES)
    both = credentials.combine(credentials.parse(_entry()), "t0")
    assert both is not None
    assert both.by_token("t0") == Principal("default", ALL_ROLES)
    assert both.by_token("s3cret") == Principal("dash", frozenset({Role.READ}))
    with pytest.raises(credentials.TokensFileError, match="also in the tokens file"):
        credentials.combine(credentials.parse(_entry()), "s3cret")
    with pytest.raises(credentials.TokensFileError, match="names an entry 'default'"):
        credentials.combine(credentials.parse(_entry(name="default")), "t0")


def test_roles_include_others() -> None:
    """admin holds every role; operate and worker hold read; nothing else is implied."""
    expected = {
        Role.READ: {Role.READ},
        Role.OPERATE: {Role.READ, Role.OPERATE},
        Role.WORKER: {Role.READ, Role.WORKER},
        Role.ADMIN: set(Role),
    }
    for held, granted in expected.items():
        principal = Principal("p", frozenset({held}))
        assert {r for r in Role if principal.may(r)} == granted, held
    assert not any(Principal("none", frozenset()).may(r) for r in Role)
