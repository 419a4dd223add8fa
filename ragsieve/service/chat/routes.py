"""OpenAI-compatible routes: `GET /v1/models`, `POST /v1/chat/completions` (JSON or server-sent events)."""

from __future__ import annotations

import json
import time
import uuid

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.background import BackgroundTask

from ragsieve.agent.answer.conversation import from_messages
from ragsieve.agent.errors import UsageError
from ragsieve.agent.plan.plans import get_plan
from ragsieve.insights.record import Surface
from ragsieve.service.auth.keys import ALL
from ragsieve.service.auth.scope import Caller, caller
from ragsieve.service.chat import direct, frontend_tasks
from ragsieve.service.chat.render import extension, finish_reason, references, url_annotations, usage
from ragsieve.service.common.errors import ApiError
from ragsieve.service.common.jobs import QuestionJob, QuestionRequest, as_api_error, question_budget
from ragsieve.service.common.requests import ChatRequest, check_text, question_overrides

router = APIRouter()


@router.get("/v1/models")
async def list_models(request: Request, who: Caller = Depends(caller)):
    registry = request.app.state.registry
    created = request.app.state.started
    ids = registry.model_ids(who.visible(list(registry.orchestrators)))
    if _passthrough_allowed(request, who):
        ids.append(frontend_tasks.PASSTHROUGH_MODEL)
    return {"object": "list", "data": [{"id": mid, "object": "model", "created": created, "owned_by": "ragsieve"} for mid in ids]}


def prepare(request: Request, body: ChatRequest, who: Caller):
    app = request.app.state
    ignored = body.checked(app.settings.max_messages)
    name, plan = who.resolve(app.registry, body.model)
    try:
        conv = from_messages(body.messages)
    except UsageError as exc:
        raise ApiError(400, str(exc), param="messages") from None
    question = check_text(conv.question, app.settings.max_question_chars)
    for turn in conv.history:
        check_text(turn.text or " ", app.settings.max_body_bytes, "history")
    if conv.instructions:
        check_text(conv.instructions, app.settings.max_body_bytes, "system message")
    overrides = question_overrides(body.top_k, body.strict)
    req = QuestionRequest(
        question=question,
        plan=plan,
        history=conv.history,
        instructions=conv.instructions,
        overrides=overrides,
        answer_options=body.answer_options(),
        where=who.where(body.where),
    )
    orch = app.registry.orchestrators[name]
    return orch, req, ignored, app.registry.logged(name, Surface.CHAT_COMPLETIONS)


@router.post("/v1/chat/completions")
async def chat_completions(request: Request, body: ChatRequest, who: Caller = Depends(caller)):
    app = request.app.state
    request.state.access_model = body.model
    if body.model == frontend_tasks.PASSTHROUGH_MODEL and _passthrough_allowed(request, who):
        ignored = body.checked(app.settings.max_messages)
        return await direct.passthrough(request, body, _ignored_header(ignored))
    task = frontend_tasks.detect(body.messages)
    if task is not None:  # a front end's title/tags/follow-ups...: answered without retrieval
        ignored = body.checked(app.settings.max_messages, json_ok=True)
        who.resolve(app.registry, body.model)
        app.metrics.requests_by_task.labels(task.task.value).inc()
        request.state.access_task = task.task.value
        return direct.task_reply(body, task, _ignored_header(ignored))
    orch, req, ignored, logged = prepare(request, body, who)
    completion_id = f"chatcmpl-{uuid.uuid4().hex}"
    created = int(time.time())
    headers = _ignored_header(ignored)
    ticket = app.admission.enter()  # a 429 is raised here, before any response starts
    limiter = ticket.limiter
    job = QuestionJob(orch, req, question_budget(orch, app.settings.request_timeout_s), logged)
    if not body.stream:
        try:
            answer = await job.result(limiter, request.is_disconnected)
        except Exception as exc:
            app.metrics.errors.labels(type(exc).__name__).inc()
            raise as_api_error(exc) from None
        finally:
            ticket.release()
        app.metrics.observe_answer(answer.plan, time.monotonic() - job.started, answer.usage, answer.trace)
        request.state.access_stages = stages(answer)
        return JSONResponse(
            {
                "id": completion_id,
                "object": "chat.completion",
                "created": created,
                "model": body.model,
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": finish_reason(answer),
                        "message": {
                            "role": "assistant",
                            "content": answer.answer + references(answer),
                            "annotations": url_annotations(answer),
                        },
                    }
                ],
                "usage": usage(answer),
                "ragsieve": extension(answer, ignored=ignored),
            },
            headers=headers,
        )

    include_usage = bool(body.stream_options and body.stream_options.include_usage)

    def chunk(delta: dict, finish: str | None = None, **more) -> str:
        data = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": body.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            **more,
        }
        return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"

    revisable = validates_answers(orch, req.plan)

    async def events():
        streamed: list[str] = []  # the text of the current answer attempt, as sent
        held: list[str] = []  # an answer a validation may still replace: sent once it is final
        try:
            yield chunk({"role": "assistant", "content": ""})
            async for item in job.stream(limiter):
                if item[0] == "token" and revisable:
                    held.append(item[1])
                elif item[0] == "token":
                    streamed.append(item[1])
                    yield chunk({"content": item[1]})
                elif item[0] == "event" and item[1] == "answer" and item[2].get("attempt", 1) > 1:
                    held = []  # the earlier attempt was never sent: nothing to take back
                elif (
                    item[0] == "event"
                    and item[1] == "step"
                    and item[2].get("step") == "validate"
                    and held
                    and item[2].get("outcome") in FINAL_VALIDATIONS
                ):
                    streamed.extend(held)
                    yield chunk({"content": "".join(held)})
                    held = []
                elif item[0] == "done":
                    answer = item[1]
                    sent = "".join(streamed)  # the answer step streams the answer text once, as it is final
                    rest = answer.answer[len(sent) :]
                    if not answer.answer.startswith(sent):  # cut short mid-stream (budget): what replaced it
                        rest = "\n\n" + answer.answer
                    yield chunk({"content": rest + references(answer), "annotations": url_annotations(answer)})
                    ttft = job.first_token_s
                    if ttft is not None:
                        app.metrics.ttft.labels(answer.plan).observe(ttft)
                    app.metrics.observe_answer(answer.plan, time.monotonic() - job.started, answer.usage, answer.trace)
                    request.state.access_stages = stages(answer)
                    yield chunk({}, finish_reason(answer), ragsieve=extension(answer, ignored=ignored, first_token_s=ttft))
                    if include_usage:
                        yield f"data: {json.dumps({'id': completion_id, 'object': 'chat.completion.chunk', 'created': created, 'model': body.model, 'choices': [], 'usage': usage(answer)})}\n\n"
                elif item[0] == "error":
                    err = item[1]
                    app.metrics.errors.labels(err.code or "error").inc()
                    yield f"data: {json.dumps(err.body() | {'status': err.status})}\n\n"
            yield "data: [DONE]\n\n"
        finally:
            ticket.release()

    return StreamingResponse(
        events(),
        media_type="text/event-stream",
        background=BackgroundTask(ticket.release),
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no", **headers},
    )


FINAL_VALIDATIONS = ("resolved", "exhausted")  # validate outcomes that end the plan (agent/plan/plans.py)


def validates_answers(orch, plan: str | None) -> bool:
    """The plan validates its answer and may write another (`answer` -> `validate`): its tokens are held until
    the validation keeps the answer, so a streamed reply never shows an answer that is then replaced."""
    try:
        spec = get_plan(plan or orch.config.plan, orch.config)
    except UsageError:  # an unknown plan fails the question itself, with its own message
        return False
    return "validate" in spec.transitions.get("answer", {}).values()


def _ignored_header(ignored: list[str]) -> dict[str, str]:
    return {"x-ragsieve-ignored-fields": ",".join(ignored)} if ignored else {}


def _passthrough_allowed(request: Request, who: Caller) -> bool:
    """The passthrough model (the LLM without retrieval) is served when enabled, to keys that reach every
    index (an open server's callers included): a key scoped to some indexes never gets the bare LLM."""
    return request.app.state.settings.passthrough_model and ALL in who.scope


def stages(answer) -> dict[str, float]:
    """Seconds per step of the plan (a step run twice adds up), for the access log."""
    out: dict[str, float] = {}
    for e in answer.trace:
        out[e.step] = out.get(e.step, 0.0) + (e.duration_s or 0.0)
    return out
