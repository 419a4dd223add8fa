"""Metadata filters on retrieval: which chunks a search may return.

`Where(source=..., path_prefix=..., language=..., kind=..., tenant=...)`; every
field set must match (AND). `source` is a chunk's source exactly (a path relative
to the index's source root, or a URL); `path_prefix` a prefix of it (`docs/api/`,
`https://example.com/guide/`); `language` a code language as the indexer names it
(`python`, `go`, ...; from the file extension, `ragsieve.tools.ingest.syntax`);
`kind` the document kind (`text`, `markdown`, `html`, `code`, ...); `tenant` the
index's tenant (`default` for a local index; a Milvus partition key value);
`symbol_kind` (`function`, `method`, `class`, `attribute`) admits only the chunks
that define a symbol of that kind (the index's symbol table,
`ragsieve.tools.index.search.symbols`; local indexes only: Milvus refuses it).
`readers` (the caller's principals, `ragsieve.tools.access`) admits only the chunks of documents the caller
may read by the index's access labels (`<index>/access.json`); the server sets it from the caller's
identity, replacing whatever a request sent. None: no access check (a local, unrestricted caller).
The local backend turns a filter into the set of rows it admits; Milvus evaluates
it server-side as a boolean expression (`milvus_expr`).
"""

from __future__ import annotations

import json

from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, field_validator

from ragsieve.tools.access.principals import principals
from ragsieve.tools.errors import UsageError
from ragsieve.tools.index.search.symbols import KINDS
from ragsieve.tools.ingest.syntax import LANGUAGES, language_of

FIELDS = ("source", "path_prefix", "language", "kind", "tenant", "symbol_kind")
Scalar = str | int | float | bool


class Where(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str | None = None
    path_prefix: str | None = None
    language: str | None = None
    kind: str | None = None
    tenant: str | None = None
    symbol_kind: str | None = None
    # any of these source prefixes (what an attribute filter of the documents API resolves to)
    prefixes: tuple[str, ...] | None = None
    # attributes of files added over HTTP (`{"team": "infra"}`, all must be equal): the server resolves them into
    # `prefixes` (`ragsieve.service.documents`); an index alone cannot evaluate them
    attributes: dict[str, Scalar] | None = None
    # the caller's principals (`user:...`, `group:...`): only documents they may read (`ragsieve.tools.access`)
    readers: tuple[str, ...] | None = None

    @field_validator("readers")
    @classmethod
    def _readers(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is None:
            return None

        try:
            return principals(value)
        except UsageError as exc:
            raise ValueError(str(exc)) from None

    def reading_as(self, readers: tuple[str, ...] | None) -> "Where":
        """This filter for a caller holding `readers` (None: unrestricted), whatever `readers` it had."""
        return self.model_copy(update={"readers": None if readers is None else principals(readers)})

    @field_validator("prefixes")
    @classmethod
    def _prefixes(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is not None and (len(value) > 10_000 or any(not p or len(p) > 4096 for p in value)):
            raise ValueError("prefixes must be up to 10,000 non-empty strings")
        return value

    @field_validator(*FIELDS)
    @classmethod
    def _check(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return None
        if not value.strip() or len(value) > 4096:
            raise ValueError(f"{info.field_name} must be 1..4096 characters")
        if info.field_name == "language":
            value = value.strip().lower()
            if value not in languages():
                raise ValueError(f"unknown language {value!r}; known: {', '.join(sorted(languages()))}")
        if info.field_name == "symbol_kind":
            value = value.strip().lower()
            if value not in KINDS:
                raise ValueError(f"unknown symbol_kind {value!r}; known: {', '.join(KINDS)}")
        return value

    @classmethod
    def parse(cls, items: list[str] | None) -> "Where | None":
        """`["path_prefix=docs/", "language=python"]` (the CLI's `--where`); None when empty."""
        values: dict[str, str] = {}
        for item in items or []:
            key, sep, value = item.partition("=")
            key = key.strip().replace("-", "_")
            if not sep or key not in FIELDS or not value.strip():
                raise UsageError(f"--where takes FIELD=VALUE with FIELD one of {', '.join(FIELDS)}; got {item!r}")
            if key in values:
                raise UsageError(f"--where {key} given twice")
            values[key] = value.strip()
        try:
            return cls.model_validate(values) if values else None
        except ValidationError as exc:
            raise UsageError(f"--where: {exc.errors()[0]['msg']}") from None
        except ValueError as exc:
            raise UsageError(f"--where: {exc}") from None

    def empty(self) -> bool:
        return (
            not any(getattr(self, f) for f in FIELDS) and self.prefixes is None and not self.attributes and self.readers is None
        )

    def _resolved(self) -> None:
        if self.attributes:
            raise UsageError(
                "attribute filters are resolved by the server that holds the files' attributes "
                "(ragsieve serve's documents API); this index alone cannot evaluate them"
            )

    def matches(self, source: str, kind: str, tenant: str = "default") -> bool:
        self._resolved()
        return (
            (self.prefixes is None or source.startswith(self.prefixes))
            and (self.source is None or source == self.source)
            and (self.path_prefix is None or source.startswith(self.path_prefix))
            and (self.language is None or language_of(source) == self.language)
            and (self.kind is None or kind == self.kind)
            and (self.tenant is None or tenant == self.tenant)
        )

    def milvus_expr(self, readable: list[str] | None = None) -> str:
        """The same filter as a Milvus boolean expression over the collection's fields; with `readers`,
        `readable` are the sources the caller may read (the index's access labels resolved)."""
        if self.symbol_kind is not None:
            raise UsageError(
                "where symbol_kind needs the index's symbol table, which the Milvus backend does "
                "not have: use a local index, or filter by path_prefix/language"
            )
        self._resolved()
        parts = []
        if self.prefixes is not None:
            parts.append(
                "(" + " or ".join(f"source like {json.dumps(_like_escape(p) + '%')}" for p in self.prefixes) + ")"
                if self.prefixes
                else "false"
            )
        if self.source is not None:
            parts.append(f"source == {json.dumps(self.source)}")
        if self.path_prefix is not None:
            parts.append(f"source like {json.dumps(_like_escape(self.path_prefix) + '%')}")
        if self.language is not None:
            exts = [e for e, lang in _extension_map().items() if lang == self.language]
            parts.append(
                "(" + " or ".join(f"source like {json.dumps('%' + _like_escape(e))}" for e in exts) + ")" if exts else "false"
            )
        if self.kind is not None:
            parts.append(f"kind == {json.dumps(self.kind)}")
        if self.tenant is not None:
            parts.append(f"tenant == {json.dumps(self.tenant)}")
        if self.readers is not None:
            if readable is None:
                raise UsageError("an access filter needs the sources its caller may read")
            parts.append(f"source in {json.dumps(sorted(readable))}" if readable else "false")
        return " and ".join(parts)


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _extension_map() -> dict[str, str]:
    return dict(LANGUAGES)


def languages() -> set[str]:
    return set(_extension_map().values())
