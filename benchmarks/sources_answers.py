"""The answers part of benchmarks/sources.py: a sample of code and documentation questions asked end to end
with the embedded model (packaged Qwen2.5-Coder 0.5B through llama.cpp, the `fast` plan), recording whether
the gold file/page is in the retrieved top 5 and in the reply's sources (its citations), and how the model
abstained. Runs unchanged against any OpenAI-compatible endpoint (OPENAI_BASE_URL / llm.base_url)."""
from __future__ import annotations

import shutil
import time
from pathlib import Path

CODE_FILES = ("http/client.py", "asyncio/tasks.py", "json/decoder.py", "logging/config.py")
CODE_QUESTIONS = [  # (question, gold file below stdlib/, a name the gold definition's label ends with)
    ("where does http.client read a chunked response body?", "http/client.py", "HTTPResponse._read_chunked"),
    ("How does asyncio.wait_for cancel the awaited task when the timeout expires?", "asyncio/tasks.py", "wait_for"),
    ("How does the JSON decoder parse a string literal with escapes?", "json/decoder.py", "py_scanstring"),
    ("How does logging.config.dictConfig configure handlers from a dictionary?", "logging/config.py", "configure"),
    ("How does HTTPConnection send the request headers to the server?", "http/client.py", "endheaders"),
    ("What happens in asyncio.gather when one of the awaitables raises an exception?", "asyncio/tasks.py", "gather"),
    ("How does http.client parse the status line of a response?", "http/client.py", "_read_status"),
    ("How does logging.config start a socket server listening for new configurations?", "logging/config.py",
     "listen"),
]


def _index(work: Path, stdlib: Path, docs: Path, web_questions, embedder) -> Path:
    from ragsieve.tools.index.builder import IndexBuilder

    src = work / "answers" / "src"
    for rel in CODE_FILES:
        (src / "stdlib" / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(stdlib / rel, src / "stdlib" / rel)
    for _, page in web_questions:
        (src / "docs" / page).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(docs / page, src / "docs" / page)
    IndexBuilder(work / "answers" / "idx", embedder=embedder, progress=False).build([src])
    return work / "answers" / "idx"


def run(work: Path, stdlib: Path, docs: Path, questions, embedder, n: int) -> dict:
    from ragsieve import Config
    from ragsieve.agent.llm.factory import describe_endpoint, open_llm
    from ragsieve.agent.orchestrator import Orchestrator

    web = list(questions[:n])
    code = CODE_QUESTIONS[:n]
    idx = _index(work, stdlib, docs, web, embedder)
    config = Config()
    llm, close = open_llm(config.llm)
    rows = []
    try:
        with Orchestrator.open(idx, config, llm=llm) as orch:
            asked = [(q, f"src/stdlib/{f}", s, "code") for q, f, s in code] + \
                    [(q, f"src/docs/{p}", "", "web") for q, p in web]
            for question, gold, symbol, corpus in asked:
                started = time.perf_counter()
                try:
                    answer = orch.ask(question, plan="fast")
                except Exception as exc:  # a failed question is counted, never aborts the run
                    rows.append({"corpus": corpus, "question": question, "error": f"{type(exc).__name__}: {exc}"})
                    continue
                top5 = [h.chunk for h in answer.context[:5]]
                rows.append({"corpus": corpus, "question": question, "gold": gold,
                             "gold_in_top5": any(c.doc_id == gold for c in top5),
                             "gold_in_sources": any(c.source == gold or c.chunk_id.startswith(gold + "#")
                                                    for c in answer.citations),
                             "definition_in_sources": bool(symbol) and any(c.symbol.endswith(symbol)
                                                                           for c in answer.citations),
                             "abstention": answer.abstention, "citations": [c.label() for c in answer.citations],
                             "answer": answer.answer[:300], "seconds": round(time.perf_counter() - started, 1)})
    finally:
        close()
    summary = {}
    for corpus in ("code", "web"):
        done = [r for r in rows if r["corpus"] == corpus and "error" not in r]
        summary[corpus] = {"asked": sum(1 for r in rows if r["corpus"] == corpus), "answered": len(done),
                           "gold_in_top5": sum(r["gold_in_top5"] for r in done),
                           "gold_in_sources": sum(r["gold_in_sources"] for r in done),
                           "abstained": sum(1 for r in done if r["abstention"])}
    return {"model": describe_endpoint(config.llm), "plan": "fast", "sample": f"{len(code)} code + {len(web)} web "
            "questions (a sample)", "summary": summary, "questions": rows}
