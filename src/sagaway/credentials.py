"""Who may call an Engine Server or a console: named tokens and client certificates, with roles.

A tokens file (TOML) names each caller and the roles it holds (``principals.Role``)::

    [[token]]
    name = "dashboard"                 # who: what the audit trail records
    roles = ["read"]
    sha256 = "9f86d081884c7d65..."     # hex SHA-256 of the token: the file holds no secret

    [[token]]
    name = "billing-worker"
    roles = ["worker"]
    token_file = "/run/secrets/billing-worker"   # or the token itself, in a file of its own

    [[certificate]]                    # mutual TLS: a verified client certificate
    subject = "CN=worker-1,O=Acme"     # its whole subject, or: common_name = "worker-1"
    roles = ["worker"]
    name = "worker-1"                  # optional; the subject (or CN=...) by default

The file stores digests rather than tokens so that it can be read by more people (and kept in
configuration management) than the tokens themselves. A token is looked up by its digest: the
digest of a random token says nothing an attacker could use, so the dictionary lookup needs no
constant-time comparison. The single token of ``--token-file`` (or its environment variable) is
the principal ``default`` holding every role, as it always had full trust.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import secrets
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sagaway.identifiers import MAX_NAME
from sagaway.principals import ALL_ROLES, Principal, Role

DEFAULT_NAME = "default"
"""The principal of the single token (``--token-file``, ``$SAGAWAY_SERVER_TOKEN``)."""
_HEX64 = re.compile(r"^[0-9a-fA-F]{64}$")
_ROLE_NAMES = ", ".join(r.value for r in Role)
_TOKEN_KEYS = frozenset({"name", "roles", "sha256", "token_file"})
_CERT_KEYS = frozenset({"name", "roles", "subject", "common_name"})


class TokensFileError(ValueError):
    """A tokens file that cannot be used; the message is one line naming the file and entry."""


def digest(token: str) -> str:
    """The hex SHA-256 of ``token`` (UTF-8), as a tokens file's ``sha256`` holds it."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def new_token() -> str:
    """A fresh random token (256 bits, URL-safe text)."""
    return secrets.token_urlsafe(32)


def toml_entry(name: str, roles: Sequence[Role], token_digest: str) -> str:
    """A ``[[token]]`` entry for a tokens file (TOML), holding the token's digest only."""
    listed = ", ".join(f'"{r.value}"' for r in roles)
    # A JSON string is a TOML basic string: JSON's escapes are all TOML escapes too.
    quoted = json.dumps(name, ensure_ascii=False)
    return f'[[token]]\nname = {quoted}\nroles = [{listed}]\nsha256 = "{token_digest}"\n'


@dataclasses.dataclass(frozen=True, slots=True)
class CertificateRule:
    """Roles for a verified client certificate with this subject (or this common name)."""

    principal: Principal
    subject: str | None = None
    common_name: str | None = None

    def matches(self, subject: str | None, common_name: str | None) -> bool:
        if self.subject is not None:
            return subject == self.subject
        return common_name is not None and common_name == self.common_name


@dataclasses.dataclass(frozen=True, slots=True)
class Credentials:
    """Known callers: tokens by digest, certificate rules in file order."""

    tokens: Mapping[str, Principal] = dataclasses.field(default_factory=dict)
    certificates: tuple[CertificateRule, ...] = ()

    def by_token(self, token: str) -> Principal | None:
        """The principal of ``token``, or None for an unknown one."""
        return self.tokens.get(digest(token))

    def by_certificate(self, subject: str | None, common_name: str | None) -> Principal | None:
        """The principal of a verified certificate's subject or common name, or None."""
        for rule in self.certificates:
            if rule.matches(subject, common_name):
                return rule.principal
        return None

    def principals(self) -> list[Principal]:
        return [*self.tokens.values(), *(rule.principal for rule in self.certificates)]

    def summary(self) -> str:
        """``3 tokens, 1 certificate`` (for the log line of a load or reload)."""
        t, c = len(self.tokens), len(self.certificates)
        return f"{t} token{'s' * (t != 1)}, {c} certificate{'s' * (c != 1)}"


def single(token: str) -> Credentials:
    """The credentials of one token: the principal ``default`` with every role."""
    return Credentials({digest(token): Principal(DEFAULT_NAME, ALL_ROLES)})


def combine(file: Credentials | None, token: str | None) -> Credentials | None:
    """A tokens file's credentials and the single token's together (None: neither given)."""
    if token is None:
        return file
    if file is None:
        return single(token)
    if any(p.name == DEFAULT_NAME for p in file.principals()):
        raise TokensFileError(
            f"the tokens file names an entry {DEFAULT_NAME!r}, the name of the single token "
            "(--token-file or its environment variable): rename the entry"
        )
    if digest(token) in file.tokens:
        raise TokensFileError(
            "the single token (--token-file or its environment variable) is also in the tokens "
            "file: drop one of them"
        )
    return Credentials({**file.tokens, **single(token).tokens}, file.certificates)


def load(path: Path) -> Credentials:
    """Read and check the tokens file at ``path`` (``TokensFileError`` says what is wrong)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "it is not UTF-8 text"
        raise TokensFileError(f"cannot read the tokens file {str(path)!r}: {why}") from None
    return parse(text, where=str(path), base=path.parent)


def parse(text: str, *, where: str = "tokens file", base: Path = Path()) -> Credentials:
    """Check a tokens file's text; ``base``: the folder relative ``token_file`` paths are in."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TokensFileError(f"{where}: not TOML: {' '.join(str(exc).split())}") from None
    return _Reader(where, base).read(data)


class _Reader:
    """Checks one file's entries in order, so that an error names the first bad one."""

    def __init__(self, where: str, base: Path) -> None:
        self.where = where
        self.base = base
        self.names: set[str] = set()
        self.tokens: dict[str, Principal] = {}
        self.token_names: dict[str, str] = {}
        self.certificates: list[CertificateRule] = []

    def fail(self, entry: str, problem: str) -> TokensFileError:
        return TokensFileError(f"{self.where}: {entry}: {problem}")

    def read(self, data: dict[str, Any]) -> Credentials:
        unknown = sorted(set(data) - {"token", "certificate"})
        if unknown:
            raise TokensFileError(
                f"{self.where}: unknown key {unknown[0]!r}: a tokens file holds [[token]] and "
                "[[certificate]] entries only"
            )
        for kind in ("token", "certificate"):
            entries = data.get(kind, [])
            if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
                raise TokensFileError(f"{self.where}: write each {kind} as a [[{kind}]] table")
        for number, entry in enumerate(data.get("token", []), 1):
            self._token(f"[[token]] #{number}", entry)
        for number, entry in enumerate(data.get("certificate", []), 1):
            self._certificate(f"[[certificate]] #{number}", entry)
        if not self.tokens and not self.certificates:
            raise TokensFileError(
                f"{self.where}: no [[token]] or [[certificate]] entry: nobody could call "
                "(`sagaway token new --name NAME --role ROLE` makes one)"
            )
        return Credentials(self.tokens, tuple(self.certificates))

    def _common(self, label: str, entry: dict[str, Any], keys: frozenset[str]) -> str:
        extra = sorted(set(entry) - keys)
        if extra:
            allowed = ", ".join(sorted(keys))
            raise self.fail(label, f"unknown field {extra[0]!r} (fields: {allowed})")
        if "roles" not in entry:
            raise self.fail(label, f"missing field 'roles' (a list of: {_ROLE_NAMES})")
        return label

    def _name(self, label: str, name: Any) -> str:
        if not isinstance(name, str) or not name.strip():
            raise self.fail(label, "'name' must be a non-empty string")
        if len(name) > MAX_NAME or any(ord(c) < 32 or 127 <= ord(c) < 160 for c in name):
            raise self.fail(label, f"'name' must be at most {MAX_NAME} characters, no controls")
        if name in self.names:
            raise self.fail(label, f"duplicate name {name!r}: each entry needs its own")
        self.names.add(name)
        return name

    def _roles(self, label: str, roles: Any) -> frozenset[Role]:
        if not isinstance(roles, list) or not roles:
            raise self.fail(label, f"'roles' must be a non-empty list of: {_ROLE_NAMES}")
        found: set[Role] = set()
        for role in roles:
            try:
                found.add(Role(role))
            except ValueError:
                raise self.fail(label, f"unknown role {role!r} (roles are {_ROLE_NAMES})") from None
        return frozenset(found)

    def _token(self, label: str, entry: dict[str, Any]) -> None:
        self._common(label, entry, _TOKEN_KEYS)
        if "name" not in entry:
            raise self.fail(label, "missing field 'name' (who holds the token)")
        name = self._name(label, entry["name"])
        label = f"{label} ({name!r})"
        roles = self._roles(label, entry["roles"])
        if ("sha256" in entry) == ("token_file" in entry):
            raise self.fail(
                label,
                "give exactly one of 'sha256' (hex SHA-256 of the token) and 'token_file'",
            )
        token_digest = (
            self._digest(label, entry["sha256"])
            if "sha256" in entry
            else digest(self._read_token(label, entry["token_file"]))
        )
        if token_digest in self.tokens:
            other = self.token_names[token_digest]
            raise self.fail(label, f"the same token as {other!r}: give each its own token")
        self.tokens[token_digest] = Principal(name, roles)
        self.token_names[token_digest] = name

    def _digest(self, label: str, value: Any) -> str:
        if not isinstance(value, str) or not _HEX64.match(value):
            raise self.fail(
                label,
                "'sha256' must be 64 hex digits, the SHA-256 of the token (`sagaway token new` "
                "prints it; or: printf %s TOKEN | sha256sum)",
            )
        return value.lower()

    def _read_token(self, label: str, value: Any) -> str:
        if not isinstance(value, str) or not value:
            raise self.fail(label, "'token_file' must be a path")
        path = self.base / Path(value).expanduser()
        try:
            token = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
            raise self.fail(label, f"cannot read token_file {str(path)!r}: {why}") from None
        if not token:
            raise self.fail(label, f"token_file {str(path)!r} is empty")
        return token

    def _certificate(self, label: str, entry: dict[str, Any]) -> None:
        self._common(label, entry, _CERT_KEYS)
        if ("subject" in entry) == ("common_name" in entry):
            raise self.fail(label, "give exactly one of 'subject' and 'common_name'")
        field = "subject" if "subject" in entry else "common_name"
        value = entry[field]
        if not isinstance(value, str) or not value.strip():
            raise self.fail(label, f"'{field}' must be a non-empty string")
        for rule in self.certificates:
            if (rule.subject if field == "subject" else rule.common_name) == value:
                raise self.fail(label, f"duplicate {field} {value!r}")
        name = self._name(label, entry.get("name", value if field == "subject" else f"CN={value}"))
        roles = self._roles(f"{label} ({name!r})", entry["roles"])
        self.certificates.append(
            CertificateRule(
                Principal(name, roles),
                subject=value if field == "subject" else None,
                common_name=value if field == "common_name" else None,
            )
        )
