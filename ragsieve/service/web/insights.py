"""The insights page (`/insights`) and its API, for admin-scoped keys: the questions the documentation is missing.

`GET /insights` is the page (no data in it); the page reads, with the key the
user typed (sent as a bearer token, kept in the tab's sessionStorage):
`GET /insights/api/indexes`, `GET /insights/api/report?index=&since=`, the
downloads `GET /insights/api/export.csv` / `export.json`, and
`POST /insights/api/export-eval` which writes a group of unanswered questions as
an evaluation set under DATA_DIR/insights-eval/. Every route needs a key whose
scope says `:admin` for the index (403 otherwise; 401 without a valid key). A key with principals reads the
report as them: no text, title or path of a document they may not read (`ragsieve.insights.compute`). A report is kept REPORT_TTL_S
seconds, so the page's downloads and its export click reuse it (a large log takes seconds to group).
"""

from __future__ import annotations

import datetime as dt
import re
import time
from pathlib import Path

import anyio
from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from ragsieve.agent.errors import UsageError
from ragsieve.insights.compute import insights_for
from ragsieve.insights.eval_set import eval_command, write_eval_set
from ragsieve.insights.record import QuestionRecord
from ragsieve.insights.report import Report, parse_since, to_csv
from ragsieve.service.auth.keys import may_administer
from ragsieve.service.auth.scope import Caller, caller
from ragsieve.service.common.errors import ApiError
from ragsieve.service.web import assets
from ragsieve.service.web.pages import PAGE_CSP, SAFE

router = APIRouter()
REPORT_TTL_S = 30.0  # the page, its downloads and its export click share one computation this long
SinceArg = Query("30d", max_length=40, description="30d, 12h, 6w or an ISO date")
IndexArg = Query(max_length=64)


class EvalExport(BaseModel):
    model_config = ConfigDict(extra="forbid")
    index: str = Field(max_length=64)
    since: str = Field("30d", max_length=40)
    group: str = Field(max_length=16, pattern=r"^g\d{1,6}$")
    label: str = Field(max_length=20_000)  # the group as the page showed it (ids change when questions arrive)


@router.get("/insights", include_in_schema=False)
async def insights_page():
    return HTMLResponse(
        assets.read("insights.html"), headers={"Content-Security-Policy": PAGE_CSP, "Cache-Control": "no-cache", **SAFE}
    )


@router.get("/insights/app.js", include_in_schema=False)
async def insights_script():
    return Response(
        assets.read("insights.js"), media_type="text/javascript; charset=utf-8", headers={"Cache-Control": "no-cache", **SAFE}
    )


def _hook(request: Request):
    hook = request.app.state.registry.insights
    if hook is None:
        raise ApiError(404, "insights are off on this server: set [insights] enabled = true in the config", code="insights_off")
    return hook


def _admin(request: Request, who: Caller, index: str) -> None:
    hook = _hook(request)
    if not may_administer(who.scope, index):
        raise ApiError(403, 'insights need an admin-scoped key for this index (scope "INDEX:admin")', code="forbidden")
    if index not in request.app.state.registry.orchestrators or not hook.logs(index):
        raise ApiError(
            404,
            f"no insights for index {index!r}: it is not served or not logged ([insights] indexes)",
            code="index_not_logged",
            param="index",
        )


@router.get("/insights/api/indexes")
async def indexes(request: Request, who: Caller = Depends(caller)):
    hook = _hook(request)
    names = [n for n in sorted(hook.names) if may_administer(who.scope, n)]
    if not names:
        raise ApiError(403, 'insights need an admin-scoped key (scope "INDEX:admin")', code="forbidden")
    return {"indexes": names, "store_answers": hook.settings.store_answers, "retention_days": hook.settings.retention_days}


async def _report(request: Request, who: Caller, index: str, since: str) -> tuple[Report, list[QuestionRecord]]:
    _admin(request, who, index)
    hook = request.app.state.registry.insights
    now = hook.log.clock()
    try:
        start = parse_since(since, now)
    except ValueError as exc:
        raise ApiError(400, str(exc), param="since") from None
    live = request.app.state.registry.orchestrators[index]
    cache = hook.reports
    slot = (index, since, who.readers)  # read as principals, a report is theirs: never another caller's
    hit = cache.get(slot)
    if hit is not None and time.monotonic() - hit[0] < REPORT_TTL_S:
        return hit[1], hit[2]

    def compute() -> tuple[Report, list[QuestionRecord]]:
        hook.log.flush(5.0)  # what was just asked is in the report
        return insights_for(
            hook.log, index, live, since=start, until=now, distance=hook.settings.group_distance, readers=who.readers
        )

    result, records = await anyio.to_thread.run_sync(compute)
    for old in [k for k, v in cache.items() if time.monotonic() - v[0] >= REPORT_TTL_S]:
        cache.pop(old, None)  # bounded: only the reports of the last REPORT_TTL_S are kept
    cache[slot] = (time.monotonic(), result, records)
    return result, records


@router.get("/insights/api/report")
async def report(request: Request, index: str = IndexArg, since: str = SinceArg, who: Caller = Depends(caller)):
    result, _ = await _report(request, who, index, since)
    return JSONResponse(result.model_dump(mode="json"), headers={"Cache-Control": "no-store"})


def _attachment(index: str, ext: str) -> dict[str, str]:
    day = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d")
    return {
        "Content-Disposition": f'attachment; filename="insights-{_safe(index)}-{day}.{ext}"',
        "Cache-Control": "no-store",
        **SAFE,
    }


@router.get("/insights/api/export.csv")
async def export_csv(request: Request, index: str = IndexArg, since: str = SinceArg, who: Caller = Depends(caller)):
    result, records = await _report(request, who, index, since)
    return Response(to_csv(result, records), media_type="text/csv; charset=utf-8", headers=_attachment(index, "csv"))


@router.get("/insights/api/export.json")
async def export_json(request: Request, index: str = IndexArg, since: str = SinceArg, who: Caller = Depends(caller)):
    result, _ = await _report(request, who, index, since)
    return Response(result.model_dump_json(indent=2), media_type="application/json", headers=_attachment(index, "json"))


@router.post("/insights/api/export-eval")
async def export_eval(request: Request, body: EvalExport, who: Caller = Depends(caller)):
    result, records = await _report(request, who, body.index, body.since)
    group = next((g for g in result.groups if g.label == body.label), None)
    if group is None:
        raise ApiError(
            409,
            "that group is no longer in the report (new questions regrouped it): reload the page",
            code="group_changed",
            param="group",
        )
    folder = _hook(request).settings.dir or request.app.state.settings.data_dir
    out = Path(folder) / "insights-eval" / f"{_safe(body.index)}-{body.group}-{time.strftime('%Y%m%d-%H%M%S')}"
    texts = {r.id: r.question for r in records}
    live = request.app.state.registry.orchestrators[body.index]
    store = live.index.store
    try:
        counts = await anyio.to_thread.run_sync(lambda: write_eval_set(group, texts, store, out, body.index))
    except UsageError as exc:
        raise ApiError(400, str(exc)) from None
    return {
        "status": "written",
        "folder": str(out),
        "group": group.id,
        "label": group.label,
        **counts,
        "command": eval_command(out, live.folder, live.config.llm),
    }


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:64]
