"""The library's exceptions: one base, a few subclasses that say whose fault it is."""


class RagsieveError(Exception):
    """Base class for every error ragsieve raises on purpose."""


class UsageError(RagsieveError):
    """The caller asked for something invalid (bad option, empty question, bad input file)."""


class IndexMissingError(RagsieveError):
    """No loadable index at the given folder."""


class ModelUnavailableError(RagsieveError):
    """A model (embedding, reranker, GGUF) cannot be obtained or fails verification."""


class ModelEndpointError(RagsieveError):
    """A model endpoint (embeddings, rerank) kept failing after retries, or replied with something unusable."""


class MissingExtraError(ModelUnavailableError):
    """An optional part of ragsieve is not installed; the message names the `pip install 'ragsieve[EXTRA]'` that
    adds it (`extra`, `module`: which extra, and the module that failed to import)."""

    def __init__(self, message: str, *, extra: str, module: str) -> None:
        super().__init__(message)
        self.extra = extra
        self.module = module
