"""The answers part of benchmarks/sources/main.py: code and documentation questions asked end to end with the
embedded model (packaged Qwen2.5-Coder 0.5B through llama.cpp, the `fast` plan), recording whether the gold
file/page is in the retrieved top 5 and in the reply's sources (its citations, the passages it lists as
retrieved but not cited included), and how the model abstained. Runs unchanged against any
OpenAI-compatible endpoint (OPENAI_BASE_URL / llm.base_url).

Questions per corpus (`n`, >= 60 for the issue's figure):
- code: the 8 questions written below (on the files as they are), then docstring questions of the code
  benchmark (a public function's first docstring sentence, asked of its module with docstrings blanked:
  `sources_sets.code_corpus`), spread evenly over the modules;
- web: the 32 page questions of benchmarks/sources/main.py, then API questions (a definition's first sentence,
  `sources_sets.api_questions`) of the same pages.
Partial results are written after every question (`on_row`), and `deadline_s` bounds the run (index build
included): questions not asked by then are counted as planned, not asked, never guessed.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from benchmarks.sources.sets import api_definitions, api_questions, code_corpus

CODE_FILES = ("http/client.py", "asyncio/tasks.py", "json/decoder.py", "logging/config.py")
CODE_QUESTIONS = [  # (question, gold file below stdlib/, a name the gold definition's label ends with)
    ("where does http.client read a chunked response body?", "http/client.py", "HTTPResponse._read_chunked"),
    ("How does asyncio.wait_for cancel the awaited task when the timeout expires?", "asyncio/tasks.py", "wait_for"),
    ("How does the JSON decoder parse a string literal with escapes?", "json/decoder.py", "py_scanstring"),
    ("How does logging.config.dictConfig configure handlers from a dictionary?", "logging/config.py", "configure"),
    ("How does HTTPConnection send the request headers to the server?", "http/client.py", "endheaders"),
    ("What happens in asyncio.gather when one of the awaitables raises an exception?", "asyncio/tasks.py", "gather"),
    ("How does http.client parse the status line of a response?", "http/client.py", "_read_status"),
    ("How does logging.config start a socket server listening for new configurations?", "logging/config.py", "listen"),
]


def _spread(items: list, n: int) -> list:
    if n <= 0:
        return []
    step = max(1, len(items) // n)
    return items[::step][:n]


def question_sets(work: Path, stdlib: Path, docs: Path, questions, modules: list[str], n: int) -> tuple[list, Path]:
    """(the asked list: (question, gold doc id, definition name, corpus, gold lines), the source folder)."""
    src = work / "answers" / "src"
    for rel in CODE_FILES:
        (src / "stdlib" / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(stdlib / rel, src / "stdlib" / rel)
    blanked = [m for m in modules if m not in CODE_FILES]
    gold = code_corpus(stdlib, src / "blanked", blanked)  # files at src/blanked/stdlib/<module>
    code = [(q, f"src/stdlib/{f}", s, "code", None) for q, f, s in CODE_QUESTIONS[:n]]
    code += [
        (g["query"], f"src/blanked/{g['file']}", g["qualname"], "code", (g["start"], g["end"]))
        for g in _spread(gold, n - len(code))
    ]
    pages = list(dict.fromkeys(p for _, p in questions[:n]))
    for page in pages:
        (src / "docs" / page).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(docs / page, src / "docs" / page)
    web = [(q, f"src/docs/{p}", "", "web", None) for q, p in questions[:n]]
    defs = [d for p in pages for d in api_definitions((docs / p).read_text(encoding="utf-8"), p)]
    web += [(d["query"], f"src/docs/{d['page']}", d["anchor"], "web", None) for d in api_questions(defs, max(0, n - len(web)))]
    return code + web, src


def _row(corpus, question, gold, symbol, lines, answer, seconds) -> dict:
    top5 = [h.chunk for h in answer.context[:5]]

    def in_gold(c) -> bool:
        same = c.doc_id == gold if hasattr(c, "doc_id") else (c.source == gold or c.chunk_id.startswith(gold + "#"))
        if not same or lines is None or c.line_start is None:
            return same
        return c.line_start <= lines[1] and (c.line_end or c.line_start) >= lines[0]

    def defines(c) -> bool:
        return bool(symbol) and (
            c.symbol.endswith(symbol) or c.symbol == "#" + symbol or symbol in [s.strip() for s in c.symbol.split(",")]
        )

    cited = [] if answer.abstention else [c for c in answer.citations if c.cited and f"[{c.number}]" in answer.answer]
    return {
        "corpus": corpus,
        "question": question,
        "gold": gold,
        "gold_lines": lines,
        "gold_in_top5": any(in_gold(c) for c in top5),
        "gold_in_sources": any(in_gold(c) for c in answer.citations),
        "gold_cited_by_answer": any(in_gold(c) for c in cited),
        "definition_in_sources": any(defines(c) for c in answer.citations),
        "abstention": answer.abstention,
        "citations": [c.label() for c in answer.citations],
        "answer": answer.answer[:300],
        "seconds": round(seconds, 1),
    }


def summarise(rows: list[dict], asked: list) -> dict:
    summary = {}
    for corpus in ("code", "web"):
        done = [r for r in rows if r["corpus"] == corpus and "error" not in r]
        summary[corpus] = {
            "planned": sum(1 for a in asked if a[3] == corpus),
            "asked": sum(1 for r in rows if r["corpus"] == corpus),
            "answered": len(done),
            **{
                k: sum(bool(r[k]) for r in done)
                for k in ("gold_in_top5", "gold_in_sources", "gold_cited_by_answer", "definition_in_sources")
            },
            "abstained": sum(1 for r in done if r["abstention"]),
            "gold_in_top5_not_in_sources": sum(1 for r in done if r["gold_in_top5"] and not r["gold_in_sources"]),
        }
    return summary


def run(
    work: Path,
    stdlib: Path,
    docs: Path,
    questions,
    embedder,
    n: int,
    modules: list[str] = (),
    deadline_s: float | None = None,
    on_row=None,
) -> dict:
    from ragsieve import Config
    from ragsieve.agent.llm.factory import describe_endpoint, open_llm
    from ragsieve.agent.orchestrator import Orchestrator
    from ragsieve.tools.index.building.builder import IndexBuilder

    started_run = time.perf_counter()  # the deadline counts the index build too
    asked, src = question_sets(work, stdlib, docs, questions, list(modules), n)
    idx = work / "answers" / "idx"
    IndexBuilder(idx, embedder=embedder, progress=False).build([src])
    config = Config()
    llm, close = open_llm(config.llm)
    rows: list[dict] = []
    head = {
        "model": describe_endpoint(config.llm),
        "plan": "fast",
        "sample": f"{sum(a[3] == 'code' for a in asked)} code + {sum(a[3] == 'web' for a in asked)} web questions",
        "also_retrieved": config.abstention.also_retrieved,
    }
    order = [a for pair in zip([a for a in asked if a[3] == "code"], [a for a in asked if a[3] == "web"]) for a in pair]
    order += [a for a in asked if a not in order]  # code and web alternately, so a cut run still has both
    try:
        with Orchestrator.open(idx, config, llm=llm) as orch:
            for question, gold, symbol, corpus, lines in order:
                if deadline_s is not None and time.perf_counter() - started_run > deadline_s:
                    break
                started = time.perf_counter()
                try:
                    answer = orch.ask(question, plan="fast")
                except Exception as exc:  # a failed question is counted, never aborts the run
                    rows.append({"corpus": corpus, "question": question, "error": f"{type(exc).__name__}: {exc}"})
                    continue
                rows.append(_row(corpus, question, gold, symbol, lines, answer, time.perf_counter() - started))
                if on_row is not None:
                    on_row({**head, "summary": summarise(rows, asked), "questions": rows, "partial": True})
    finally:
        close()
    return {
        **head,
        "summary": summarise(rows, asked),
        "questions": rows,
        "partial": len(rows) < len(asked),
        "seconds": round(time.perf_counter() - started_run, 1),
    }
