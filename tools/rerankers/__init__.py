"""Reranker providers (a cross-encoder, FlashRank, an HTTP /rerank endpoint) behind one protocol, opened once."""

from ragsieve.tools.rerankers.base import ProviderReranker, RerankMethod, RerankProvider, RerankResult, passage_text, restamp
from ragsieve.tools.rerankers.factory import KINDS, open_reranker

__all__ = [
    "KINDS",
    "ProviderReranker",
    "RerankMethod",
    "RerankProvider",
    "RerankResult",
    "open_reranker",
    "passage_text",
    "restamp",
]
