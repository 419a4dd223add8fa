"""Replies that skip retrieval: front ends' background tasks (answered here) and the passthrough model.

A background task (`frontend_tasks.detect`) gets its reply at once, in the
shape its template asks for, with no LLM call; the passthrough model id sends
the messages to the server's LLM unchanged (a front end's "task model"), under
the same admission limits and per-request deadline as a question. Both answer
in OpenAI's chat completion shape (JSON or server-sent events) and say what
they were in the `x-ragsieve-task` header and the `ragsieve` field.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid

import anyio
from fastapi import Request
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.background import BackgroundTask

from ragsieve.agent.answer.conversation import message_text
from ragsieve.agent.errors import UsageError
from ragsieve.agent.llm.budget import QuestionBudget
from ragsieve.service.chat.frontend_tasks import TaskRequest, reply_text
from ragsieve.service.common import shutdown
from ragsieve.service.common.errors import ApiError
from ragsieve.service.common.jobs import as_api_error
from ragsieve.service.common.requests import check_text


def _chunk(cid: str, created: int, model: str, delta: dict, finish: str | None = None, **more) -> str:
    data = {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **more,
    }
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"


def _usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def task_reply(body, task: TaskRequest, headers: dict[str, str]):
    """The background task's reply, no retrieval, no LLM call."""
    text = reply_text(task)
    ext = {"task": task.task.value, "client": task.client, "retrieval": False}
    headers = {**headers, "x-ragsieve-task": task.task.value}
    cid, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())
    usage = _usage(0, 0)
    if not body.stream:
        return JSONResponse(
            {
                "id": cid,
                "object": "chat.completion",
                "created": created,
                "model": body.model,
                "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
                "usage": usage,
                "ragsieve": ext,
            },
            headers=headers,
        )
    include_usage = bool(body.stream_options and body.stream_options.include_usage)

    async def events():
        yield _chunk(cid, created, body.model, {"role": "assistant", "content": text})
        yield _chunk(cid, created, body.model, {}, "stop", ragsieve=ext)
        if include_usage:
            yield f"data: {json.dumps({'id': cid, 'object': 'chat.completion.chunk', 'created': created, 'model': body.model, 'choices': [], 'usage': usage})}\n\n"
        yield "data: [DONE]\n\n"

    return StreamingResponse(
        events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no", **headers}
    )


def passthrough_messages(messages: list[dict], settings) -> list[dict[str, str]]:
    out = []
    for i, m in enumerate(messages):
        role = m.get("role") if isinstance(m, dict) else None
        if role not in ("system", "developer", "user", "assistant"):
            raise ApiError(400, f"messages[{i}]: role {role!r} is not supported by the passthrough model", param="messages")
        try:
            text = message_text(m.get("content"), f"messages[{i}]")
        except UsageError as exc:
            raise ApiError(400, str(exc), param="messages") from None
        out.append(
            {
                "role": "system" if role == "developer" else role,
                "content": check_text(text or " ", settings.max_body_bytes, "message"),
            }
        )
    if out[-1]["role"] != "user":
        raise ApiError(400, "the last message must be the user's (role 'user')", param="messages")
    return out


async def passthrough(request: Request, body, headers: dict[str, str]):
    """The messages sent to the server's LLM as they are: no retrieval, no citations."""
    app = request.app.state
    messages = passthrough_messages(body.messages, app.settings)
    options = body.answer_options()
    headers = {**headers, "x-ragsieve-task": "passthrough"}
    ticket = app.admission.enter()
    budget = QuestionBudget(app.settings.request_timeout_s)
    cid, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())
    ext = {"task": "passthrough", "retrieval": False}

    def run(on_token=None):
        llm = app.registry.shared_llm().fork(budget=budget)
        text = llm.text(messages, max_tokens=options.get("max_tokens"), temperature=options.get("temperature"), on_token=on_token)
        u = llm.meter.snapshot()
        return text, _usage(u.prompt_tokens, u.completion_tokens)

    if not body.stream:
        try:
            text, usage = await anyio.to_thread.run_sync(run, limiter=ticket.limiter)
        except Exception as exc:
            raise as_api_error(exc) from None
        finally:
            ticket.release()
        return JSONResponse(
            {
                "id": cid,
                "object": "chat.completion",
                "created": created,
                "model": body.model,
                "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
                "usage": usage,
                "ragsieve": ext,
            },
            headers=headers,
        )

    include_usage = bool(body.stream_options and body.stream_options.include_usage)
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue()

    async def events():
        task = asyncio.ensure_future(
            anyio.to_thread.run_sync(
                lambda: run(lambda t: loop.call_soon_threadsafe(queue.put_nowait, ("token", t))), limiter=ticket.limiter
            )
        )
        task.add_done_callback(lambda _t: queue.put_nowait(("finished", None)))
        task.add_done_callback(lambda t: t.cancelled() or t.exception())  # read: no "never retrieved" log
        unwatch = shutdown.watch(lambda: queue.put_nowait(("shutdown", None)))
        try:
            yield _chunk(cid, created, body.model, {"role": "assistant", "content": ""})
            while True:
                kind, value = await queue.get()
                if kind == "shutdown":  # the graceful-shutdown grace runs out: an error event, then [DONE]
                    err = shutdown.cut("passthrough")
                    yield f"data: {json.dumps(err.body() | {'status': err.status})}\n\n"
                    yield "data: [DONE]\n\n"
                    budget.cancel("the server is shutting down")
                    task.cancel()
                    return
                if kind == "finished":
                    break
                yield _chunk(cid, created, body.model, {"content": value})
            try:
                _text, usage = task.result()
            except Exception as exc:
                err = as_api_error(exc)
                yield f"data: {json.dumps(err.body() | {'status': err.status})}\n\n"
            else:
                yield _chunk(cid, created, body.model, {}, "stop", ragsieve=ext)
                if include_usage:
                    yield f"data: {json.dumps({'id': cid, 'object': 'chat.completion.chunk', 'created': created, 'model': body.model, 'choices': [], 'usage': usage})}\n\n"
            yield "data: [DONE]\n\n"
        finally:
            unwatch()
            if not task.done():
                budget.cancel("the client disconnected")
            ticket.release()

    return StreamingResponse(
        events(),
        media_type="text/event-stream",
        background=BackgroundTask(ticket.release),
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no", **headers},
    )
