"""The assistant's API, used by the chat page and the widget: `GET /ui/api/config`, `POST /ui/api/ask`
(server-sent events: step, answer, token, done, error), `POST /ui/api/feedback`."""

from __future__ import annotations

import json
import time
from typing import Any, Literal

import anyio
from fastapi import APIRouter, Depends, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.background import BackgroundTask

from ragsieve.agent.answer.conversation import from_messages
from ragsieve.agent.errors import UsageError
from ragsieve.service.common.errors import ApiError
from ragsieve.service.common.insights_hook import surface_of_page
from ragsieve.service.common.jobs import QuestionJob, QuestionRequest, question_budget
from ragsieve.service.common.requests import check_text, question_overrides
from ragsieve.service.web.access import UiCaller, ui_caller
from ragsieve.service.web.links import public_citations

router = APIRouter()
MAX_HISTORY = 40
PRIVATE_SUMMARY_KEYS = {"plot"}  # server file paths are not shown to browsers


class Turn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Literal["user", "assistant"]
    content: str = Field(max_length=50_000)


class UiAsk(BaseModel):
    model_config = ConfigDict(extra="forbid")
    question: str
    index: str | None = Field(None, max_length=64)
    plan: str | None = Field(None, max_length=64)
    history: list[Turn] = Field(default_factory=list, max_length=MAX_HISTORY)
    strict: bool | None = None  # an answer citing no passage becomes the abstention; default: on for the widget


class UiFeedback(BaseModel):
    model_config = ConfigDict(extra="forbid")
    answer_id: str = Field(min_length=32, max_length=32, pattern="^[0-9a-f]+$")
    rating: Literal["up", "down"]
    comment: str = Field("", max_length=2000)


@router.get("/ui/api/config")
async def config(request: Request, who: UiCaller = Depends(ui_caller)):
    registry = request.app.state.registry
    names = who.visible(sorted(registry.orchestrators))
    plans = [p for p in registry.plans if p in who.widget.plans] if who.widget else list(registry.plans)
    defaults = {n: registry.orchestrators[n].config.plan for n in names}
    return {
        "indexes": [{"name": n, "default_plan": defaults[n]} for n in names],
        "plans": list(plans),
        "feedback": request.app.state.web.feedback is not None,
        "widget": who.widget is not None,
    }


def _public_trace(trace) -> list[dict[str, Any]]:
    out = []
    for e in trace:
        item = e.model_dump()
        item["summary"] = {k: v for k, v in item.get("summary", {}).items() if k not in PRIVATE_SUMMARY_KEYS}
        out.append(item)
    return out


@router.post("/ui/api/ask")
async def ask(request: Request, body: UiAsk, who: UiCaller = Depends(ui_caller)):
    app = request.app.state
    web = app.web
    name = who.index(app.registry, body.index)
    plan = body.plan
    if plan is not None and (plan not in app.registry.plans or (who.widget and plan not in who.widget.plans)):
        shown = sorted(who.widget.plans) if who.widget else app.registry.plans
        raise ApiError(404, f"no plan {plan!r} here; plans: {', '.join(shown) or 'the index default only'}", param="plan")
    question = check_text(body.question, app.settings.max_question_chars)
    history = []
    if body.history:
        try:
            turns = [t.model_dump() for t in body.history] + [{"role": "user", "content": question}]
            history = from_messages(turns).history
        except UsageError as exc:
            raise ApiError(400, str(exc), param="history") from None
    orch = app.registry.orchestrators[name]
    ticket = app.admission.enter()
    strict = body.strict if body.strict is not None else (True if who.widget else None)
    job = QuestionJob(
        orch,
        QuestionRequest(
            question=question, plan=plan, history=history, where=who.where(), overrides=question_overrides(strict=strict)
        ),
        question_budget(orch, app.settings.request_timeout_s),
        app.registry.logged(name, surface_of_page(who.via)),
    )

    def sse(event: str, data) -> str:
        return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False, default=str)}\n\n"

    async def events():
        try:
            async for item in job.stream(ticket.limiter):
                if item[0] == "event":
                    data = item[2]
                    if item[1] == "step":
                        data = {
                            **data,
                            "summary": {k: v for k, v in (data.get("summary") or {}).items() if k not in PRIVATE_SUMMARY_KEYS},
                        }
                    yield sse(item[1], data)
                elif item[0] == "token":
                    yield sse("token", {"text": item[1]})
                elif item[0] == "done":
                    answer = item[1]
                    app.metrics.observe_answer(answer.plan, time.monotonic() - job.started, answer.usage, answer.trace)
                    citations = public_citations(web.secret, name, answer.citations, who.readers)
                    trace = _public_trace(answer.trace)
                    answer_id = None
                    if web.feedback is not None:
                        answer_id = await anyio.to_thread.run_sync(
                            lambda: web.feedback.record_answer(
                                answer_id=job.answer_id,
                                index=name,
                                plan=answer.plan,  # noqa: B023
                                asked=question,
                                question=answer.question,  # noqa: B023
                                answer=answer.answer,  # noqa: B023
                                citations=citations,  # noqa: B023
                                trace=trace,  # noqa: B023
                                history=[t.model_dump() for t in body.history],
                                via=who.via,
                            )
                        )
                    yield sse(
                        "done",
                        {
                            "answer_id": answer_id,
                            "index": name,
                            "plan": answer.plan,
                            "question": answer.question,
                            "asked": answer.asked,
                            "answer": answer.answer,
                            "citations": citations,
                            "resolved": answer.resolved,
                            "abstention": answer.abstention,
                            "stopped": answer.stopped,
                            "trace": trace,
                            "grounding": answer.grounding.value,
                            "grounded": answer.grounded,
                        },
                    )
                elif item[0] == "error":
                    app.metrics.errors.labels(item[1].code or "error").inc()
                    yield sse("error", item[1].body() | {"status": item[1].status})
        finally:
            ticket.release()

    return StreamingResponse(
        events(),
        media_type="text/event-stream",
        background=BackgroundTask(ticket.release),
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


@router.post("/ui/api/feedback")
async def feedback(request: Request, body: UiFeedback, who: UiCaller = Depends(ui_caller)):
    store = request.app.state.web.feedback
    if store is None:
        raise ApiError(503, "feedback is not stored by this server (start it with --data-dir)", code="no_feedback_store")
    index = await anyio.to_thread.run_sync(store.answer_index, body.answer_id)
    if index is None or index not in who.visible([index]):
        raise ApiError(404, "no such answer (it may have expired)", code="answer_not_found", param="answer_id")
    rating = 1 if body.rating == "up" else -1
    await anyio.to_thread.run_sync(store.rate, body.answer_id, rating, body.comment)
    hook = request.app.state.registry.insights
    if hook is not None and hook.logs(index):
        hook.rated(body.answer_id, rating)
    return {"status": "stored", "answer_id": body.answer_id, "rating": body.rating}
