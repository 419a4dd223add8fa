"""What embeds a `ragsieve index` build: a local model or an embeddings endpoint from the `[index]` settings, and
the Ray stage `--ray` asks for."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ragsieve.agent.config import IndexConfig
from ragsieve.agent.errors import UsageError

if TYPE_CHECKING:
    from ragsieve.tools.index.building.ray_embed import RayEmbedStage
    from ragsieve.tools.index.embedders.local_embedder import Embedder
    from ragsieve.tools.index.embedders.openai_embedder import OpenAIEmbedder


def remote_embedder(ic: IndexConfig, args: argparse.Namespace) -> OpenAIEmbedder | Embedder | None:
    """The embeddings-endpoint provider when one is configured (nothing is sent yet); None: a local model,
    loaded by the builder only when there is something to embed."""
    if (ic.embedding_provider or ("openai" if ic.embed_base_url else None)) != "openai":
        if ic.embed_dimensions or ic.embed_concurrency != 1:
            configured_embedder(ic)  # refuses the setting with its reason
        return None
    return configured_embedder(ic, args.embedding_model, args.encoder)


def configured_embedder(ic: IndexConfig, model: str | None = None, encoder: str | None = None) -> Embedder | OpenAIEmbedder:
    """The provider the `[index]` settings name, for `ragsieve index` (queries use the one the index records)."""
    provider = ic.embedding_provider or ("openai" if ic.embed_base_url else "sentence-transformers")
    model, chosen = model or ic.embedding_model, encoder or ic.encoder
    if provider == "sentence-transformers":
        if ic.embed_base_url or ic.embed_dimensions:
            raise UsageError('embed_base_url / embed_dimensions need embedding_provider = "openai"')
        if ic.embed_concurrency != 1:
            raise UsageError(
                "embed_concurrency applies to an embeddings endpoint (embed_base_url); a local model "
                "keeps its device busy by itself (device, embed_batch_size)"
            )
        from ragsieve.tools.index.embedders.device import default_encoder_for, resolve_device
        from ragsieve.tools.index.embedders.local_embedder import Embedder

        device = resolve_device(ic.device)
        return Embedder(
            model,
            batch_size=ic.embed_batch_size or (512 if device.gpu else 64),
            encoder=chosen or default_encoder_for(device),
            device=ic.device,
        )
    if not ic.embed_base_url:
        raise UsageError('embedding_provider = "openai" needs embed_base_url (e.g. http://127.0.0.1:8080/v1)')
    if encoder or ic.encoder != type(ic).model_fields["encoder"].default:
        raise UsageError(f"encoder {chosen!r} applies to local models only, not to an embeddings endpoint")
    from ragsieve.tools.index.embedders.openai_embedder import OpenAIEmbedder

    return OpenAIEmbedder(
        ic.embed_base_url,
        model,
        api_key_env=ic.embed_api_key_env,
        batch_size=ic.embed_batch_size or 64,
        dimensions=ic.embed_dimensions,
        concurrency=ic.embed_concurrency,
        max_input_tokens=ic.embed_max_input_tokens,
        timeout_s=ic.embed_timeout_s,
        max_attempts=ic.embed_max_attempts,
        max_retry_s=ic.embed_max_retry_s,
    )


def ray_stage(args: argparse.Namespace, device: str = "auto") -> RayEmbedStage | None:
    """The Ray embedding stage `--ray` asks for (None without it); a missing `ray` extra is said before any work.
    `--device cpu` keeps the actors off the cluster's GPUs; a GPU device asks for them."""
    if args.ray is None:
        if args.ray_gpus_per_actor is not None or args.ray_actors is not None or args.ray_batch_size is not None:
            raise UsageError("--ray-actors, --ray-batch-size and --ray-gpus-per-actor apply with --ray only")
        return None
    from ragsieve.tools.index.building.ray_embed import RayEmbedStage, import_ray

    import_ray()
    gpus = args.ray_gpus_per_actor
    if gpus is None and device == "cpu":
        gpus = 0.0
    return RayEmbedStage(
        address=args.ray,
        actors=args.ray_actors,
        batch_size=args.ray_batch_size,
        gpus_per_actor=gpus,
        require_gpus=device.startswith(("cuda", "mps")),
    )
