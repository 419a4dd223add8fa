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
