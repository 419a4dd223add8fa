"""Prompt templates: Jinja files in the `prompts` package, rendered in the sandbox.

Document text is data, never instructions: templates that show passages wrap
each in a fence derived from the fenced data (`new_fence(...)`, a sha256
prefix) that no document can contain, or pass them as escaped JSON (`| json`).
Every template declares what it needs; rendering fails loudly on a missing
variable (StrictUndefined) and on an unexpected one (checked against the
template's own undeclared-variable set), as haystack's PromptBuilder does.
"""

from __future__ import annotations

import functools
import hashlib
import json
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
from jinja2 import meta
from jinja2.sandbox import ImmutableSandboxedEnvironment

from ragsieve.agent.errors import TemplateError

FENCE_PREFIX = "@@"


def new_fence(*data: Any) -> str:
    """A delimiter for one rendering, derived from the data it fences (sha256, 64 bits shown).

    A document cannot contain it: the fence depends on the document's own text, and
    no text can hold a hash of itself. Being deterministic, the same request renders
    the same prompt, so the reply cache still works.
    """
    blob = json.dumps(data, sort_keys=True, ensure_ascii=False, default=str).encode("utf-8")
    return f"{FENCE_PREFIX}{hashlib.sha256(blob).hexdigest()[:16]}"


def _tojson_compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


class PromptRenderer:
    """Loads `NAME.j2` from the packaged prompts (or `directory`) and renders it."""

    def __init__(self, directory: str | Path | None = None) -> None:
        self._directory = Path(directory) if directory else Path(str(resources.files("ragsieve.prompts")))
        if not self._directory.is_dir():
            raise TemplateError(f"prompt folder not found: {self._directory}")
        self._env = ImmutableSandboxedEnvironment(
            loader=jinja2.FileSystemLoader(str(self._directory)),
            undefined=jinja2.StrictUndefined,
            autoescape=False,
            keep_trailing_newline=False,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self._env.filters["json"] = _tojson_compact
        self._env.globals["new_fence"] = new_fence  # `{% set fence = new_fence(passages) %}`

    def fingerprint(self) -> str:
        """sha256 over every template's name and text: part of the LLM cache key."""
        digest = hashlib.sha256()
        for path in sorted(self._directory.glob("*.j2")):
            digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
        return digest.hexdigest()

    def names(self) -> list[str]:
        return sorted(p.stem for p in self._directory.glob("*.j2"))

    def variables(self, name: str) -> set[str]:
        source = self._source(name)
        return meta.find_undeclared_variables(self._env.parse(source)) - set(self._env.globals)

    def render(self, name: str, **variables: Any) -> str:
        expected = self.variables(name)
        unexpected = set(variables) - expected
        missing = expected - set(variables)
        if unexpected or missing:
            raise TemplateError(f"template {name!r}: missing variables {sorted(missing)}, unexpected {sorted(unexpected)}")
        try:
            return self._env.get_template(f"{name}.j2").render(**variables).strip()
        except jinja2.TemplateError as exc:
            raise TemplateError(f"template {name!r} failed to render: {exc}") from exc

    def _source(self, name: str) -> str:
        path = self._directory / f"{name}.j2"
        if not path.is_file():
            raise TemplateError(f"no prompt template {name!r} in {self._directory} (have: {self.names()})")
        return path.read_text(encoding="utf-8")


@functools.lru_cache(maxsize=1)
def default_renderer() -> PromptRenderer:
    """The packaged templates, loaded once (for the LLM client's own texts: re-ask, schema note)."""
    return PromptRenderer()
