"""Request bodies of the service, validated; what a body asks that ragsieve cannot do is refused (400)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ragsieve.service.common.errors import ApiError
from ragsieve.tools.index.search.where import Where

# OpenAI fields a chat client may send (audited per client in docs/frontends.md): applied (temperature,
# max_tokens, stream ...), accepted when their value changes nothing (top_p 1, penalties 0, n 1 ...), refused
# otherwise; `user`/`metadata` are labels. `tools`/`functions` are offered tools the model may decline to call:
# accepted (and reported as ignored) unless the request forces a call, which ragsieve cannot honour.
NEUTRAL = {"top_p": 1, "n": 1, "presence_penalty": 0, "frequency_penalty": 0, "logprobs": False}
REFUSED_WHEN_SET = ("logit_bias", "stop", "seed", "top_logprobs", "audio", "prediction")
LABELS = ("user", "metadata", "store", "service_tier", "reasoning_effort")
OFFERED_TOOLS = ("tools", "functions")  # a model may decline every offered tool: answered, reported as ignored
FREE_CHOICE = (None, "auto", "none")  # tool_choice / function_call values that do not force a call


class StreamOptions(BaseModel):
    include_usage: bool = False


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1, max_length=200)
    messages: list[dict[str, Any]] = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    temperature: float | None = Field(None, ge=0, le=2)
    max_tokens: int | None = Field(None, ge=1, le=32_000)
    max_completion_tokens: int | None = Field(None, ge=1, le=32_000)
    top_k: int | None = Field(None, ge=1, le=100)  # ragsieve extension: chunks retrieved for the context
    where: Where | None = None  # ragsieve extension: metadata filter (source, path_prefix, language, kind, tenant)
    strict: bool | None = None  # ragsieve extension: `abstention.strict` for this question (agent/answer/grounding.py)

    def checked(self, max_messages: int, *, json_ok: bool = False) -> list[str]:
        """Refuse what cannot be applied; return the names of unknown fields (reported, not applied)."""
        if len(self.messages) > max_messages:
            raise ApiError(
                400,
                f"too many messages ({len(self.messages)}); the limit is {max_messages}",
                code="too_many_messages",
                param="messages",
            )
        extra = dict(self.model_extra or {})
        for name, neutral in NEUTRAL.items():
            if name in extra:
                value = extra.pop(name)
                if value is not None and value != neutral:
                    raise ApiError(
                        400,
                        f"{name}={value!r} is not supported (ragsieve answers with one choice "
                        f"from its own sampling); omit it or send {neutral!r}",
                        param=name,
                    )
        ignored = _tool_fields(extra)
        for name in REFUSED_WHEN_SET:
            if name in extra:
                value = extra.pop(name)
                if value not in (None, [], {}):
                    raise ApiError(400, f"{name} is not supported by ragsieve; omit it", param=name)
        modalities = extra.pop("modalities", None)
        if modalities not in (None, [], ["text"]):
            raise ApiError(400, 'modalities other than ["text"] are not supported', param="modalities")
        fmt = extra.pop("response_format", None)
        if fmt not in (None, {"type": "text"}) and not (
            json_ok and isinstance(fmt, dict) and fmt.get("type") in ("json_object", "json_schema")
        ):
            raise ApiError(400, "response_format other than text is not supported", param="response_format")
        for name in LABELS:
            extra.pop(name, None)
        return sorted(set(extra) | set(ignored))

    def answer_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {}
        limit = self.max_completion_tokens or self.max_tokens
        if limit is not None:
            options["max_tokens"] = limit
        if self.temperature is not None:
            options["temperature"] = self.temperature
        return options


def _tool_fields(extra: dict[str, Any]) -> list[str]:
    """Offered tools are accepted (the model declines them); a forced call (`tool_choice` "required" or a
    named function, `function_call` naming one) is refused. Returns the tool fields that were present."""
    present = [name for name in (*OFFERED_TOOLS, "tool_choice", "function_call", "parallel_tool_calls") if name in extra]
    for name in ("tool_choice", "function_call"):
        value = extra.get(name)
        if value not in FREE_CHOICE:
            shown = value if isinstance(value, str) else "a named function"
            raise ApiError(
                400,
                f"{name}={shown!r} forces a tool call, which ragsieve cannot make (it answers from "
                f'its index and calls no tools); send "auto" or "none", or omit it',
                param=name,
            )
    for name in present:
        extra.pop(name)
    return present


class AskRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: str
    index: str | None = Field(None, max_length=64)  # required when the server has several indexes
    plan: str | None = Field(None, max_length=64)
    top_k: int | None = Field(None, ge=1, le=100)
    history: list[dict[str, Any]] = Field(default_factory=list)  # earlier turns: [{"role", "content"}]
    max_tokens: int | None = Field(None, ge=1, le=32_000)
    temperature: float | None = Field(None, ge=0, le=2)
    where: Where | None = None  # metadata filter: source, path_prefix, language, kind, tenant (all must match)
    strict: bool | None = None  # an answer citing no passage is replaced by the abstention (`abstention.strict`)


def check_text(text: str, limit: int, what: str = "question") -> str:
    """Non-empty, within `limit` characters, valid Unicode (a lone surrogate is refused, not mangled)."""
    if not text.strip():
        raise ApiError(400, f"the {what} is empty", code="empty_question", param=what)
    if len(text) > limit:
        raise ApiError(400, f"the {what} is {len(text)} characters; the limit is {limit}", code="question_too_long", param=what)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ApiError(
            400, f"the {what} holds invalid Unicode (a lone surrogate such as \\ud800)", code="invalid_unicode", param=what
        ) from None
    return text


def question_overrides(top_k: int | None = None, strict: bool | None = None) -> dict[str, dict[str, Any]]:
    """The config sections a request's own settings change for its question only."""
    out: dict[str, dict[str, Any]] = {}
    if top_k:
        out["retrieval"] = {"top_k": top_k}
    if strict is not None:
        out["abstention"] = {"strict": strict}
    return out
