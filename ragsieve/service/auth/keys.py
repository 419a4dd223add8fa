"""API keys and their scopes: which key may reach which index.

Keys come from the `RAGSIEVE_API_KEYS` environment variable (comma-separated;
each reaches every index) and/or a keys file (TOML):

    [keys]
    "sk-team-docs" = ["docs"]          # this key reaches the `docs` index only
    "sk-admin" = ["*"]                 # every index
    "sk-ci" = ["docs:write"]           # `docs`, and it may change it (upload, delete, crawl)
    "sk-ops" = ["*:write"]             # every index, writes too (also creating vector stores)
    "sk-owner" = ["docs:admin"]        # `docs`, and its insights (/insights: what users asked)

A key may instead be a table that also says who it reads as (docs/access.md)::

    [keys."sk-portal"]
    indexes = ["docs"]
    principals = ["group:staff"]       # answers only from documents these principals may read
    assert_identity = true             # may forward its users' identities (from [identity] trusted_proxies)

A key reads only unless its scope says `:write` (read-only keys get 403 on
writes); only a key whose scope says `:admin` sees an index's insights (the
question log). The keys in `RAGSIEVE_API_KEYS` are the operator's: they read,
write and administer everything, as does everyone on an open loopback server.

No key configured means an open server, which `serve` allows on a loopback
address only (or with `--allow-public-without-keys`). A request whose index is
outside its key's scope is answered exactly like an unknown index (404), so a
key never learns that another tenant's index exists.
"""

from __future__ import annotations

import hmac
import os
import sys
from pathlib import Path

from ragsieve.agent.errors import RagsieveError, UsageError
from ragsieve.service.auth.identity import IdentitySettings, KeyIdentity
from ragsieve.tools.access.principals import principals

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, from PyPI (a dependency there)
    import tomli as tomllib

ENV_VAR = "RAGSIEVE_API_KEYS"
ALL = "*"
WRITE = ":write"
ADMIN = ":admin"
OPERATOR = {ALL, ALL + WRITE, ALL + ADMIN}


def read_keys_file(path: Path) -> dict:
    """The keys file's TOML (API keys and widget keys), or a UsageError that says what is wrong with it."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"keys file not found: {path}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"keys file {path} is not valid TOML: {exc}") from None


class KeyRing:
    def __init__(
        self,
        scopes: dict[str, set[str]] | None = None,
        identities: dict[str, KeyIdentity] | None = None,
        identity: IdentitySettings | None = None,
    ):
        self.scopes = {k: set(v) for k, v in (scopes or {}).items()}
        self.identities = dict(identities or {})  # keys that read as principals or may assert identities
        self.identity = identity or IdentitySettings()
        for key in self.scopes:
            if len(key) < 8 or any(c.isspace() for c in key):
                spaced = ", with a space" if any(c.isspace() for c in key) else ""
                named = f"the API key starting {key[:2]!r}" if len(key) > 2 else "an API key"  # never all of it
                raise UsageError(
                    f"{named} ({len(key)} characters{spaced}) is refused: every API key must be at "
                    "least 8 characters without spaces (RAGSIEVE_API_KEYS or the keys file)"
                )

    @classmethod
    def load(cls, keys_file: str | None = None, environ: dict[str, str] | None = None) -> "KeyRing":
        env = os.environ if environ is None else environ
        scopes: dict[str, set[str]] = {}
        identities: dict[str, KeyIdentity] = {}
        identity = IdentitySettings()
        for key in (env.get(ENV_VAR) or "").split(","):
            if key.strip():
                scopes.setdefault(key.strip(), set()).update(OPERATOR)
        if keys_file:
            path = Path(keys_file)
            data = read_keys_file(path)
            table = data.get("keys", {} if "widget_keys" in data else None)  # widget keys: widget_keys.py
            if not isinstance(table, dict) or (not table and "widget_keys" not in data):
                raise UsageError(f'keys file {path} needs a [keys] table: "key" = ["index", ...]')
            identity = IdentitySettings.from_toml(data.get("identity"), path.parent)
            for key, indexes in table.items():
                if isinstance(indexes, dict):
                    indexes, identities[key] = key_entry(path, indexes)
                if not isinstance(indexes, list) or not all(isinstance(i, str) for i in indexes):
                    raise UsageError(f"keys file {path}: the scope of a key must be a list of index names")
                scopes.setdefault(key, set()).update(indexes)
        return cls(scopes, identities, identity)

    def identity_of(self, key: str | None) -> KeyIdentity | None:
        """What `key` says about identities (None: an unknown key, or one without principals or rights)."""
        for known, found in self.identities.items():
            if key and hmac.compare_digest(known.encode(), key.encode()):
                return found
        return None

    @property
    def enabled(self) -> bool:
        return bool(self.scopes)

    def scope(self, key: str | None) -> set[str] | None:
        """The indexes `key` reaches (`{"*"}` = all); None when the key is unknown."""
        if not self.enabled:
            return set(OPERATOR)
        if not key:
            return None
        for known, indexes in self.scopes.items():  # constant-time comparison for each known key
            if hmac.compare_digest(known.encode(), key.encode()):
                return indexes
        return None

    def check_names(self, names: set[str]) -> None:
        for _key, indexes in self.scopes.items():
            unknown = sorted({i.removesuffix(WRITE).removesuffix(ADMIN) for i in indexes} - names - {ALL})
            if unknown:
                raise UsageError(f"a key is scoped to unknown index(es) {unknown}; served: {sorted(names)}")


def key_entry(path: Path, entry: dict) -> tuple[list, KeyIdentity]:
    """A key written as a table: (its indexes, its identity)."""
    unknown = set(entry) - {"indexes", "principals", "assert_identity"}
    if unknown or not isinstance(entry.get("assert_identity", False), bool):
        raise UsageError(
            f"keys file {path}: a key table takes indexes = [...], principals = [...] and "
            f"assert_identity = true|false (got {sorted(unknown) or 'a non-boolean assert_identity'})"
        )
    listed = entry.get("principals")
    try:
        readers = None if listed is None else principals(listed)
    except RagsieveError as exc:
        raise UsageError(f"keys file {path}: {exc}") from None
    return entry.get("indexes", []), KeyIdentity(readers, bool(entry.get("assert_identity", False)))


def allows(scope: set[str], index: str) -> bool:
    return bool({ALL, index, ALL + WRITE, index + WRITE, ALL + ADMIN, index + ADMIN} & scope)


def may_administer(scope: set[str], index: str) -> bool:
    """Whether a key may see `index`'s insights (its question log): an `:admin` scope, or the operator's."""
    return ALL + ADMIN in scope or index + ADMIN in scope


def may_write(scope: set[str], index: str) -> bool:
    """Whether a key may change `index` (`index` "*" asks for every index: creating a vector store)."""
    return ALL + WRITE in scope or (index != ALL and index + WRITE in scope)
