"""Build the app from a serialisable spec (what each `--workers` process receives)."""

from __future__ import annotations

import json
import os

from ragsieve.agent.config import Config
from ragsieve.service.app import create_app
from ragsieve.service.auth.keys import KeyRing
from ragsieve.service.indexes.registry import IndexRegistry
from ragsieve.service.settings import ServiceSettings


def build(spec: dict):
    """spec: {"indexes": {name: dir}, "config": Config dump, "settings": ServiceSettings dump, "keys_file"}."""
    settings = ServiceSettings.model_validate(spec["settings"])
    config = Config.model_validate(spec["config"])
    keys = KeyRing.load(spec.get("keys_file"))
    registry = IndexRegistry(spec["indexes"], config, llm_parallel=settings.llm_parallel)
    from ragsieve.service.auth.widget_keys import WidgetKeys

    return create_app(
        registry,
        settings,
        keys,
        preload_model=spec.get("preload_model", True),
        close_registry=True,
        widget_keys=WidgetKeys.load(spec.get("keys_file")),
    )


def app_from_env():
    """The entry point of a `--workers` process (the application, so it may route its access lines to stderr)."""
    from ragsieve.service.middleware.access_log import to_stderr

    to_stderr()
    return build(json.loads(os.environ["RAGSIEVE_SERVE_SPEC"]))
