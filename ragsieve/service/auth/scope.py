"""Who is calling: the API key's scope, checked on every route that touches an index."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request

from ragsieve.service.auth.identity import IdentityRefused, looks_like_jwt, resolve
from ragsieve.service.auth.keys import ALL, WRITE, allows
from ragsieve.service.common.errors import ApiError
from ragsieve.tools.index.search.where import Where


@dataclass
class Caller:
    scope: set[str]
    # the principals answers are read as (`ragsieve.service.auth.identity`); None: unrestricted
    readers: tuple[str, ...] | None = None

    @property
    def admin(self) -> bool:
        """An unrestricted key reaching every index: it may see documents' access lists."""
        return self.readers is None and bool({ALL, ALL + WRITE} & self.scope)

    def where(self, where: Where | None) -> Where | None:
        """A request's metadata filter read as this caller: its `readers` replaced by the caller's own."""
        if self.readers is None:
            return where if where is None or where.readers is None else where.reading_as(None)
        return (where or Where()).reading_as(self.readers)

    def visible(self, names: list[str]) -> list[str]:
        return [n for n in names if allows(self.scope, n)]

    def resolve(self, registry, model: str) -> tuple[str, str | None]:
        """(index, plan) for a model id; an index outside the key's scope is 'not found', like a missing one."""
        try:
            name, plan = registry.resolve(model)
        except KeyError:
            name, plan = None, None
        if name is None or not allows(self.scope, name):
            raise ApiError(
                404, f"the model {model!r} does not exist or you do not have access to it", code="model_not_found", param="model"
            )
        return name, plan


def peer(request: Request) -> str | None:
    """The socket peer's address (uvicorn runs without proxy headers: `X-Forwarded-For` never changes it)."""
    client = request.scope.get("client")
    return client[0] if client else None


def caller(request: Request) -> Caller:
    return identify(request.app.state.keys, request.headers, peer(request))


def identify(keys, headers, host: str | None) -> Caller:
    """The caller a request's headers make (API key scope, principals); ApiError 401/403 otherwise."""
    header = headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    key = token.strip() if scheme.lower() == "bearer" else None
    scope = keys.scope(key)
    settings = keys.identity
    try:
        if scope is None and key and settings.jwt is not None and looks_like_jwt(key):
            return Caller(set(settings.jwt.indexes), settings.jwt.verify(key))  # a user's own signed token
        if scope is None:
            raise ApiError(
                401,
                "missing or invalid API key: send 'Authorization: Bearer <key>'",
                code="invalid_api_key",
                headers={"WWW-Authenticate": "Bearer"},
            )
        return Caller(scope, resolve(settings, keys.identity_of(key), headers, host))
    except IdentityRefused as exc:
        raise ApiError(
            exc.status, str(exc), code="identity_refused", headers={"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        ) from None
