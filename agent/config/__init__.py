"""Configuration: plain pydantic models passed explicitly (no global settings).

`Config.load(path)` reads a TOML file whose tables match the sections below;
`LLMConfig` also reads the usual environment variables (OPENAI_BASE_URL,
OPENAI_API_KEY, OPENAI_MODEL / RAGSIEVE_MODEL) when a field is not set.

Sections, one file per group: `index` (index, retrieval), `llm` (llm, budget), `loop` (loop, fallback,
rerank), `filters` (conformal, abstention, outliers, segments), `tracing`, `settings` (insights, plans, `Config`).
The config is the foundation's top: it imports only errors and the mode Enums (`ragsieve.agent.modes`,
`ragsieve.tools.modes`), never the tools or steps it configures.
"""

from ragsieve.agent.config.filters import AbstentionConfig, ConformalConfig, OutlierConfig, SegmentConfig
from ragsieve.agent.config.index import IndexConfig, RetrievalConfig
from ragsieve.agent.config.llm import BudgetConfig, LLMConfig
from ragsieve.agent.config.loop import FallbackConfig, LoopConfig, RerankConfig
from ragsieve.agent.config.settings import PROMPT_RESERVE, Config, InsightsConfig, PlanSpec
from ragsieve.agent.config.tracing import TracingConfig

__all__ = [
    "PROMPT_RESERVE",
    "AbstentionConfig",
    "BudgetConfig",
    "Config",
    "ConformalConfig",
    "FallbackConfig",
    "IndexConfig",
    "InsightsConfig",
    "LLMConfig",
    "LoopConfig",
    "OutlierConfig",
    "PlanSpec",
    "RerankConfig",
    "RetrievalConfig",
    "SegmentConfig",
    "TracingConfig",
]
