"""The optional parts of ragsieve (its pip extras), and the one-line error when one is missing.

`pip install ragsieve` is the library; a surface or a heavy part is an extra the user names
(`pip install 'ragsieve[server]'`). Code that needs one imports it through `require`, which turns the
ImportError into a `MissingExtraError` naming the command that installs it: the CLI prints that one line,
never a traceback. The lowest layer: tools, agent and the front ends may all use it.
"""

from __future__ import annotations

import sys
from enum import Enum
from types import ModuleType

from ragsieve.tools.errors import MissingExtraError


class Extra(str, Enum):
    """An extra of the `ragsieve` distribution, by the name pip knows it by (pyproject's optional-dependencies)."""

    SERVER = "server"  # the OpenAI-compatible HTTP service, documents API, chat page, widget (`ragsieve serve`)
    MCP = "mcp"  # the MCP server (`ragsieve mcp`, and /mcp on `ragsieve serve`)
    CRAWL = "crawl"  # websites and HTML pages (`ragsieve index https://...`, .html files)
    DOCUMENTS = "documents"  # PDF and DOCX files
    CODE = "code"  # code cut by its syntax tree (tree-sitter grammars)
    FAST = "fast"  # the onnx / onnx-int8 encoders (ONNX Runtime)
    LOCAL = "local"  # the embedded LLM (llama.cpp and the packaged Qwen 0.5B)
    MILVUS = "milvus"  # the Milvus index backend
    RAY = "ray"  # indexing on a Ray cluster
    EVAL = "eval"  # `ragsieve eval` plots and the outlier filter's plot (matplotlib)
    OTEL = "otel"  # OpenTelemetry spans exported over OTLP/HTTP (docs/tracing.md)


# what `ragsieve serve` imports from the server extra (python-multipart's import name is python_multipart)
SERVER_MODULES = ("fastapi", "uvicorn", "python_multipart", "prometheus_client")


def install_command(extra: Extra) -> str:
    return f"pip install 'ragsieve[{extra.value}]'"


def missing(extra: Extra, what: str, module: str, hint: str = "") -> MissingExtraError:
    """The error for `what` (e.g. "ragsieve serve") lacking `module`, naming the install command; `hint`: an
    alternative that needs no install, appended in parentheses."""
    tail = f" ({hint})" if hint else ""
    return MissingExtraError(
        f"{what} needs the {extra.value} extra ({module} is not installed): {install_command(extra)}{tail}",
        extra=extra.value,
        module=module,
    )


def require(extra: Extra, module: str, what: str, hint: str = "") -> ModuleType:
    """`module` imported, or a `MissingExtraError` saying that `what` needs `extra` and how to install it."""
    try:
        __import__(module)  # the import statement's own hook (as `import module` would)
    except ImportError as exc:  # the module, or one of its own dependencies (installed with the extra)
        raise missing(extra, what, exc.name or module, hint) from None
    return sys.modules[module]


def require_all(extra: Extra, modules: tuple[str, ...], what: str, hint: str = "") -> None:
    """Each of `modules` importable, or the `MissingExtraError` of the first that is not."""
    for module in modules:
        require(extra, module, what, hint)
