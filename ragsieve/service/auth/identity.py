"""Who is asking, for permission-aware answers: the caller's principals (`ragsieve.tools.access`).

In order of precedence:

1. a signed user token (a JWT in `X-Ragsieve-User-Token`, or as the bearer itself when it is not an API key):
   verified against the issuer, audience and JWKS (a file or an https URL) of the keys file's
   `[identity.jwt]`; its user claim becomes `user:<value>` and each entry of its groups claim `group:<name>`;
2. proxy headers, accepted only from a client address in `[identity] trusted_proxies` AND with a key whose
   entry says `assert_identity = true`: Open WebUI's forwarded user (`ENABLE_FORWARD_USER_INFO_HEADERS`:
   `X-OpenWebUI-User-Email` -> `user:<email>`, `-Id` -> `user:<id>`, `-Role` -> `group:openwebui-<role>`;
   `-Name` is a display name and grants nothing) or `X-Forwarded-User` / `X-Forwarded-Groups`;
3. the API key's own `principals`.

A key with none of these reads unrestricted, as before. Identity headers from anyone else, and a bad, expired
or wrongly signed token, are refused with one line (403 / 401), never ignored.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragsieve.agent.errors import UsageError
from ragsieve.tools.access.principals import principals

OPENWEBUI = ("x-openwebui-user-email", "x-openwebui-user-id", "x-openwebui-user-role", "x-openwebui-user-name")
FORWARDED = ("x-forwarded-user", "x-forwarded-groups")
USER_TOKEN = "x-ragsieve-user-token"
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class IdentityRefused(Exception):
    """A claimed identity that cannot be accepted; `status` 401 (bad token) or 403 (not allowed to claim)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class KeyIdentity:
    """What a key says about identities: its own principals (None: unrestricted) and whether it may assert
    a user's identity through proxy headers."""

    principals: tuple[str, ...] | None = None
    assert_identity: bool = False


@dataclass
class JwtSettings:
    issuer: str
    audience: str
    jwks: str  # a JSON file (relative to the keys file) or an https:// URL
    user_claim: str = "email"
    groups_claim: str = "groups"
    indexes: tuple[str, ...] = ("*",)  # the indexes a bearer token alone reaches
    algorithms: tuple[str, ...] = ("RS256", "ES256")
    leeway_s: float = 30.0
    _keys: Any = field(default=None, repr=False)

    def verify(self, token: str) -> tuple[str, ...]:
        """The token's principals; IdentityRefused(401) when it is not valid now for this audience."""
        try:
            import jwt
        except ImportError:
            raise UsageError("verifying user tokens needs PyJWT: pip install 'ragsieve[server]'") from None
        try:
            header = jwt.get_unverified_header(token)
            key = self._signing_key(jwt, header.get("kid"))
            claims = jwt.decode(
                token,
                key,
                algorithms=list(self.algorithms),
                audience=self.audience,
                issuer=self.issuer,
                leeway=self.leeway_s,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.PyJWTError as exc:
            raise IdentityRefused(401, f"user token refused: {exc}") from None
        user = claims.get(self.user_claim) or claims.get("sub")
        groups = claims.get(self.groups_claim) or []
        if not isinstance(user, str) or not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
            raise IdentityRefused(
                401, f"user token refused: it needs a string {self.user_claim!r} (or 'sub') and a list {self.groups_claim!r}"
            )
        try:
            return principals([f"user:{user}"] + [f"group:{g}" for g in groups])
        except UsageError as exc:
            raise IdentityRefused(401, f"user token refused: {exc}") from None

    def _signing_key(self, jwt: Any, kid: str | None) -> Any:
        if self.jwks.startswith("https://"):
            if self._keys is None:
                self._keys = jwt.PyJWKClient(self.jwks, cache_keys=True, lifespan=300)
            return self._keys.get_signing_key(kid).key
        if self._keys is None:
            self._keys = jwt.PyJWKSet.from_json(Path(self.jwks).read_text(encoding="utf-8"))
        found = [k for k in self._keys.keys if kid is None or k.key_id == kid]
        if not found:
            raise jwt.InvalidKeyError(f"no key {kid!r} in the JWKS")
        return found[0].key


@dataclass
class IdentitySettings:
    trusted_proxies: tuple[Network, ...] = ()
    jwt: JwtSettings | None = None

    @classmethod
    def from_toml(cls, table: Any, base: Path) -> "IdentitySettings":
        if table is None:
            return cls()
        if not isinstance(table, dict) or set(table) - {"trusted_proxies", "jwt"}:
            raise UsageError('keys file [identity] takes trusted_proxies = ["10.0.0.5/32", ...] and a [identity.jwt] table')
        try:
            proxies = tuple(ipaddress.ip_network(p, strict=False) for p in table.get("trusted_proxies", []))
        except (TypeError, ValueError) as exc:
            raise UsageError(f"keys file [identity] trusted_proxies: {exc}") from None
        jwt_table = table.get("jwt")
        jwt_settings = None
        if jwt_table is not None:
            allowed = {"issuer", "audience", "jwks", "user_claim", "groups_claim", "indexes", "algorithms", "leeway_s"}
            missing = {"issuer", "audience", "jwks"} - set(jwt_table)
            if not isinstance(jwt_table, dict) or set(jwt_table) - allowed or missing:
                raise UsageError(
                    f"keys file [identity.jwt] needs issuer, audience and jwks (a file or https URL); "
                    f"it may also set {', '.join(sorted(allowed - {'issuer', 'audience', 'jwks'}))}"
                )
            jwks = str(jwt_table["jwks"])
            if jwks.startswith("http://"):
                raise UsageError("keys file [identity.jwt] jwks must be a file or an https:// URL")
            if not jwks.startswith("https://"):
                jwks = str((base / jwks).resolve())
                if not Path(jwks).is_file():
                    raise UsageError(f"keys file [identity.jwt] jwks file not found: {jwks}")
            jwt_settings = JwtSettings(
                issuer=str(jwt_table["issuer"]),
                audience=str(jwt_table["audience"]),
                jwks=jwks,
                user_claim=str(jwt_table.get("user_claim", "email")),
                groups_claim=str(jwt_table.get("groups_claim", "groups")),
                indexes=tuple(jwt_table.get("indexes", ["*"])),
                algorithms=tuple(jwt_table.get("algorithms", ["RS256", "ES256"])),
                leeway_s=float(jwt_table.get("leeway_s", 30.0)),
            )
        return cls(proxies, jwt_settings)

    def trusted(self, host: str | None) -> bool:
        if not host:
            return False
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return False
        return any(address in net for net in self.trusted_proxies)


def looks_like_jwt(token: str) -> bool:
    return token.count(".") == 2 and token.startswith("eyJ")


def proxy_principals(headers: Any) -> tuple[str, ...] | None:
    """The principals forwarded user headers name (None: no identity header at all)."""
    present = [h for h in OPENWEBUI + FORWARDED if headers.get(h)]
    if not present:
        return None
    found: list[str] = []
    email, uid, role = (headers.get(h, "").strip() for h in OPENWEBUI[:3])
    found += [f"user:{v}" for v in (email, uid) if v]
    if role:
        found.append(f"group:openwebui-{role}")
    user = headers.get("x-forwarded-user", "").strip()
    if user:
        found.append(f"user:{user}")
    found += [f"group:{g.strip()}" for g in headers.get("x-forwarded-groups", "").split(",") if g.strip()]
    if not found:
        raise IdentityRefused(403, "identity headers name no user: send X-OpenWebUI-User-Email or X-Forwarded-User")
    try:
        return principals(found)
    except UsageError as exc:
        raise IdentityRefused(403, f"identity headers refused: {exc}") from None


def resolve(settings: IdentitySettings, key: KeyIdentity | None, headers: Any, client_host: str | None) -> tuple[str, ...] | None:
    """The caller's principals (None: unrestricted) for a request whose API key said `key`."""
    token = headers.get(USER_TOKEN, "").strip()
    if token:
        if settings.jwt is None:
            raise IdentityRefused(403, "user tokens are not accepted: the keys file has no [identity.jwt]")
        return settings.jwt.verify(token)
    forwarded = proxy_principals(headers)
    if forwarded is not None:
        if not settings.trusted(client_host) or key is None or not key.assert_identity:
            raise IdentityRefused(
                403, "identity headers are accepted only from a trusted proxy with a key that may assert identities"
            )
        return forwarded
    return None if key is None else key.principals
