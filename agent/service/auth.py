"""Who is calling: the API key's scope, checked on every route that touches an index."""
from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request

from ragsieve.agent.service.errors import ApiError
from ragsieve.agent.service.keys import allows


@dataclass
class Caller:
    scope: set[str]

    def visible(self, names: list[str]) -> list[str]:
        return [n for n in names if allows(self.scope, n)]

    def resolve(self, registry, model: str) -> tuple[str, str | None]:
        """(index, plan) for a model id; an index outside the key's scope is 'not found', like a missing one."""
        try:
            name, plan = registry.resolve(model)
        except KeyError:
            name, plan = None, None
        if name is None or not allows(self.scope, name):
            raise ApiError(404, f"the model {model!r} does not exist or you do not have access to it",
                           code="model_not_found", param="model")
        return name, plan


def caller(request: Request) -> Caller:
    keys = request.app.state.keys
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    key = token.strip() if scheme.lower() == "bearer" else None
    scope = keys.scope(key)
    if scope is None:
        raise ApiError(401, "missing or invalid API key: send 'Authorization: Bearer <key>'",
                       code="invalid_api_key", headers={"WWW-Authenticate": "Bearer"})
    return Caller(scope)
