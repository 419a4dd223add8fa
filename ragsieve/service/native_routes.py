"""ragsieve's own routes: `POST /v1/ask` (the `--json` answer), `POST /v1/ask/stream` (step events, then
answer tokens, as server-sent events), `GET /healthz`, `GET /readyz`, `GET /metrics`."""

from __future__ import annotations

import json
import time

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.background import BackgroundTask

from ragsieve.agent.answer.conversation import from_messages
from ragsieve.agent.errors import UsageError
from ragsieve.insights.record import Surface
from ragsieve.service.auth.scope import Caller, caller
from ragsieve.service.common.errors import ApiError
from ragsieve.service.common.jobs import QuestionJob, QuestionRequest, as_api_error, question_budget
from ragsieve.service.common.requests import AskRequest, check_text, question_overrides

router = APIRouter()


def _prepare(request: Request, body: AskRequest, who: Caller):
    app = request.app.state
    default = app.registry.default_index(who.visible(list(app.registry.orchestrators)))
    if body.index is None and default is None:
        raise ApiError(400, "name the index: this server has several (see GET /v1/models)", param="index")
    model = body.index or default
    if body.plan:
        model = f"{model}:{body.plan}"
    name, plan = who.resolve(app.registry, model)
    question = check_text(body.question, app.settings.max_question_chars)
    history = []
    if body.history:
        try:
            history = from_messages(body.history + [{"role": "user", "content": question}]).history
        except UsageError as exc:
            raise ApiError(400, str(exc), param="history") from None
        for turn in history:
            check_text(turn.text or " ", app.settings.max_body_bytes, "history")
    options = {k: v for k, v in {"max_tokens": body.max_tokens, "temperature": body.temperature}.items() if v is not None}
    req = QuestionRequest(
        question=question,
        plan=plan,
        history=history,
        answer_options=options,
        overrides=question_overrides(body.top_k, body.strict),
        where=who.where(body.where),
    )
    return app.registry.orchestrators[name], req, app.registry.logged(name, Surface.ASK)


@router.post("/v1/ask")
@router.post("/ask", include_in_schema=False)  # the route of the first release
async def ask(request: Request, body: AskRequest, who: Caller = Depends(caller)):
    app = request.app.state
    orch, req, logged = _prepare(request, body, who)
    async with app.admission.slot() as limiter:
        job = QuestionJob(orch, req, question_budget(orch, app.settings.request_timeout_s), logged)
        try:
            answer = await job.result(limiter, request.is_disconnected)
        except Exception as exc:
            app.metrics.errors.labels(type(exc).__name__).inc()
            raise as_api_error(exc) from None
    app.metrics.observe_answer(answer.plan, time.monotonic() - job.started, answer.usage, answer.trace)
    return JSONResponse(answer.public())


@router.post("/v1/ask/stream")
async def ask_stream(request: Request, body: AskRequest, who: Caller = Depends(caller)):
    app = request.app.state
    orch, req, logged = _prepare(request, body, who)
    ticket = app.admission.enter()
    limiter = ticket.limiter
    job = QuestionJob(orch, req, question_budget(orch, app.settings.request_timeout_s), logged)

    def sse(event: str, data) -> str:
        return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False, default=str)}\n\n"

    async def events():
        try:
            async for item in job.stream(limiter):
                if item[0] == "event":
                    yield sse(item[1], item[2])
                elif item[0] == "token":
                    yield sse("token", {"text": item[1]})
                elif item[0] == "done":
                    app.metrics.observe_answer(item[1].plan, time.monotonic() - job.started, item[1].usage, item[1].trace)
                    yield sse("done", item[1].public())
                elif item[0] == "error":
                    yield sse("error", item[1].body() | {"status": item[1].status})
        finally:
            ticket.release()

    return StreamingResponse(
        events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"}, background=BackgroundTask(ticket.release)
    )


@router.get("/healthz")
@router.get("/health", include_in_schema=False)
async def healthz():
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(request: Request):
    app = request.app.state
    registry = app.registry
    checks = {
        "indexes": {
            name: orch.index.store.count() >= 0 and registry.index_ready(name) for name, orch in registry.orchestrators.items()
        },
        "model": registry.llm_ready,
    }
    if registry.llm_error:
        checks["model_error"] = registry.llm_error
    ready = all(checks["indexes"].values()) and registry.llm_ready
    return JSONResponse({"status": "ready" if ready else "starting", **checks}, status_code=200 if ready else 503)


@router.get("/metrics")
async def metrics(request: Request, who: Caller = Depends(caller)):
    return Response(request.app.state.metrics.render(), media_type="text/plain; version=0.0.4")
