"""Errors of the agent layer; the base and input errors live in `ragsieve.tools.errors`."""

from ragsieve.tools.errors import IndexMissingError, MissingExtraError, ModelUnavailableError, RagsieveError, UsageError


class LLMError(RagsieveError):
    """Talking to the LLM failed."""


class EndpointError(LLMError):
    """The endpoint could not be reached or kept failing after retries (transport fault)."""

    def __init__(self, message: str, *, base_url: str | None = None, attempts: int = 0) -> None:
        super().__init__(message)
        self.base_url = base_url
        self.attempts = attempts


class StructuredOutputError(LLMError):
    """The model's reply did not validate, even after one re-ask (model misbehaviour)."""

    def __init__(self, message: str, *, raw: str = "", errors: str = "") -> None:
        super().__init__(message)
        self.raw = raw
        self.errors = errors


class ContextOverflow(LLMError):
    """The endpoint refused a prompt longer than the model's context window (`requested` and `available`: its
    token counts, when the endpoint says them). The answer step retries with fewer passages."""

    def __init__(self, message: str, *, requested: int | None = None, available: int | None = None) -> None:
        super().__init__(message)
        self.requested = requested
        self.available = available


class BudgetExceeded(LLMError):
    """The question's deadline, LLM-call or token budget is spent (`reason` says which)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class TemplateError(RagsieveError):
    """A prompt template is missing or was rendered with missing/unexpected variables."""


__all__ = [
    "RagsieveError",
    "UsageError",
    "IndexMissingError",
    "ModelUnavailableError",
    "MissingExtraError",
    "LLMError",
    "EndpointError",
    "ContextOverflow",
    "BudgetExceeded",
    "StructuredOutputError",
    "TemplateError",
]
