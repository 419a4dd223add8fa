"""`POST /v1/vector_stores/{id}/search` (OpenAI's shape) and the native jobs: `POST /v1/indexes/{name}/crawl`,
`GET /v1/jobs/{id}`."""

from __future__ import annotations

import os
from typing import Any

import anyio
from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from ragsieve.service.auth.keys import allows
from ragsieve.service.auth.scope import Caller, caller
from ragsieve.service.common.errors import ApiError
from ragsieve.service.documents import views
from ragsieve.service.documents.access import docs_of, readable_store, submit, writable
from ragsieve.service.documents.filters import matches
from ragsieve.service.documents.ingest import job_view
from ragsieve.service.documents.job_store import KEEP_JOBS
from ragsieve.tools.index.search.where import Where

router = APIRouter()
WORKER_HEADER = "x-ragsieve-worker"  # the process that answered (`serve --workers N`): job state is the same in all


# -- search ------------------------------------------------------------------------------
RANKERS = ("auto", "default-2024-11-15", "none")


class RankingOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ranker: str = "auto"
    score_threshold: float = Field(0.0, ge=0.0, le=1.0)


class StoreSearch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str | list[str]
    filters: dict[str, Any] | None = None
    max_num_results: int = Field(10, ge=1, le=50)
    ranking_options: RankingOptions | None = None
    rewrite_query: bool = False


@router.post("/v1/vector_stores/{store_id}/search")
async def search_store(request: Request, store_id: str, body: StoreSearch, who: Caller = Depends(caller)):
    docs = docs_of(request)
    readable_store(request, who, store_id)
    queries = [body.query] if isinstance(body.query, str) else list(body.query)
    if not queries or not all(isinstance(q, str) and q.strip() for q in queries) or len(" ".join(queries)) > 8000:
        raise ApiError(400, "query must be a non-empty string (or list of strings), up to 8,000 characters", param="query")
    if body.rewrite_query:
        raise ApiError(400, "rewrite_query is not supported: send the query to search for", param="rewrite_query")
    ranking = body.ranking_options or RankingOptions()
    if ranking.ranker not in RANKERS:  # search never reranks: every accepted ranker is ragsieve's hybrid ranking
        raise ApiError(
            400,
            f"ranking_options.ranker: one of {', '.join(RANKERS)} (all mean ragsieve's hybrid ranking, no reranker)",
            param="ranking_options.ranker",
        )
    where = None
    if body.filters is not None:
        matches(body.filters, {})  # a malformed filter is refused even on an empty store
        entries = docs.catalog.entries(store_id)
        keep = {e["id"] for e in entries if matches(body.filters, e.get("attributes") or {})}
        where = Where(prefixes=tuple(f"{fid}/" for fid in sorted(keep)))
    where = who.where(where)  # the caller's access, inside the search
    docs.touch(store_id)
    live = docs.registry.orchestrators.get(store_id)
    data = (
        []
        if live is None
        else await anyio.to_thread.run_sync(
            views.search, docs, live, store_id, " ".join(queries), body.max_num_results, where, ranking.score_threshold
        )
    )
    return {
        "object": "vector_store.search_results.page",
        "search_query": queries,
        "data": data,
        "has_more": False,
        "next_page": None,
    }


# -- native jobs ---------------------------------------------------------------------------
class CrawlRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str = Field(min_length=8, max_length=4096, description="start page or sitemap (http:// or https://)")
    max_pages: int = Field(200, ge=1, le=10_000)
    same_domain: bool = False
    rate: float = Field(2.0, gt=0, le=20, description="requests per second to that site")


@router.post("/v1/indexes/{name}/crawl", status_code=202)
async def crawl(request: Request, name: str, body: CrawlRequest, who: Caller = Depends(caller)):
    docs = docs_of(request)
    readable_store(request, who, name)
    writable(who, name)
    if not body.url.startswith(("http://", "https://")):
        raise ApiError(400, "url must start with http:// or https://", param="url")
    crawl_options = {"max_pages": body.max_pages, "same_domain": body.same_domain, "rate": body.rate}
    return job_view(submit(docs, "crawl", name, url=body.url, crawl=crawl_options))


@router.get("/v1/jobs/{job_id}")
async def get_job(request: Request, job_id: str, who: Caller = Depends(caller)):
    job = docs_of(request).ingestor.get(job_id) if job_id.startswith("job_") and len(job_id) <= 64 else None
    if job is None or not allows(who.scope, job["index"]):
        raise ApiError(404, f"no job {job_id!r} (the last {KEEP_JOBS} finished jobs are remembered)", code="not_found")
    return JSONResponse(job, headers={WORKER_HEADER: str(os.getpid())})
