"""`ragsieve index`'s embedder from the `[index]` settings (moved out of the config, which imports no tools):
each refused combination says why in one line, and an endpoint provider is built without sending anything."""

from __future__ import annotations

import pytest

from ragsieve.agent.config import IndexConfig
from ragsieve.agent.errors import UsageError
from ragsieve.cli.embedders import configured_embedder
from ragsieve.tools.index.embedders.openai_embedder import OpenAIEmbedder


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        ({"embed_dimensions": 64}, 'need embedding_provider = "openai"'),
        ({"embed_concurrency": 4}, "embed_concurrency applies to an embeddings endpoint"),
        ({"embedding_provider": "openai"}, "needs embed_base_url"),
        ({"embed_base_url": "http://127.0.0.1:9/v1", "encoder": "onnx"}, "applies to local models only"),
    ],
)
def test_refused_settings_say_why(settings, says):
    with pytest.raises(UsageError, match=says):
        configured_embedder(IndexConfig(**settings))


def test_an_endpoint_gets_the_openai_provider_with_its_settings():
    ic = IndexConfig(embed_base_url="http://127.0.0.1:9/v1", embed_dimensions=48, embed_concurrency=3, embed_batch_size=16)
    embedder = configured_embedder(ic, "fake-embed")
    assert isinstance(embedder, OpenAIEmbedder)
    assert (embedder.name, embedder.dimensions, embedder.batch_size) == ("fake-embed", 48, 16)
    assert embedder.requests == 0  # built, nothing sent
    with pytest.raises(UsageError, match="applies to local models only"):
        configured_embedder(ic, encoder="torch")
