"""What `ragsieve serve` is configured with (built by the CLI, passed to the app: no global settings)."""

from __future__ import annotations

from pydantic import BaseModel, Field, field_validator


class ServiceSettings(BaseModel):
    """Limits of one server process. Every limit is applied; none is advisory."""

    host: str = "127.0.0.1"
    port: int = Field(8765, ge=0, le=65535)
    workers: int = Field(1, ge=1, le=64)
    max_concurrent: int = Field(4, ge=1, le=256)  # questions running at once (threads)
    queue_limit: int = Field(16, ge=0, le=10_000)  # questions waiting beyond that; more get 429
    retry_after_s: int = Field(2, ge=1, le=3600)  # the Retry-After a 429 carries
    request_timeout_s: float = Field(120.0, gt=0, le=3600)  # deadline of one question, queueing included
    max_body_bytes: int = Field(1_000_000, ge=1024, le=100_000_000)
    body_timeout_s: float = Field(10.0, gt=0, le=600)  # the whole request body must arrive within this
    max_question_chars: int = Field(8_000, ge=1, le=100_000)
    max_messages: int = Field(64, ge=1, le=10_000)
    llm_parallel: int = Field(4, ge=1, le=64)  # LLM calls at once (the embedded server gets as many slots)
    max_connections: int = Field(1000, ge=8, le=100_000)  # open connections; beyond it the oldest idle one closes
    idle_timeout_s: float = Field(10.0, gt=0, le=600)  # a request's head must arrive within this (connections.py)
    graceful_shutdown_s: float = Field(30.0, gt=0, le=3600)  # in-flight requests may finish within this
    cors_origins: list[str] = Field(default_factory=list)  # browser front ends allowed to call (CORS)
    allow_public_without_keys: bool = False
    # the documents API's files and vector stores, the chat page's feedback store and link secret (None: both off)
    data_dir: str | None = None
    max_file_bytes: int = Field(20_000_000, ge=1024, le=1_000_000_000)  # one uploaded file; larger get 413
    max_files: int = Field(10_000, ge=1, le=1_000_000)  # uploaded files kept by the server
    max_files_per_store: int = Field(10_000, ge=1, le=1_000_000)
    max_vector_stores: int = Field(100, ge=1, le=100_000)
    ingest_queue: int = Field(64, ge=1, le=10_000)  # ingestion jobs waiting; more get 429
    passthrough_model: bool = True  # list `ragsieve-passthrough`: messages to the LLM as they are (a task model)

    @field_validator("host")
    @classmethod
    def _host(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("host is empty")
        return value.strip()


LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def is_loopback(host: str) -> bool:
    return host in LOOPBACK or host.startswith("127.")
