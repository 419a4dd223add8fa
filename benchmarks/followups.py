"""Follow-up rewriting: does the searched question keep the new turn's intent? (two-turn conversations)

Each conversation has a first question, an answer, a follow-up that refers
back ("Which of those lets me delete a workspace?") and the follow-up's gold
documents. A rewrite is judged by retrieval: recall@k of the follow-up's gold
with the rewrite as the query. Conversations:
- `lumen`: written by hand over `examples/docs` (gold: the page that answers the follow-up);
- `hotpotqa`: built from `../shared/data/hotpotqa` questions that name one of their gold
  titles: turn 1 asks about that entity (answered with the first sentence of its page),
  turn 2 is the question with the entity replaced by "it" (a construction, stated as such).

Queries compared (same retriever, same k):
- `raw`: the follow-up's words alone;
- `previous`: the previous question (what a rewrite that loses the new intent searches);
- `guard_on_previous`: `rewrite_question` with a scripted rewriter that returns the previous
  question (the failure seen with LangChain, the AI SDK and Open WebUI): the keep-the-intent
  guard must catch it;
- `anchored`: the follow-up with the previous question beside it (the guard's fallback);
- `oracle`: the stand-alone question written by hand (hotpotqa: the original question);
- `llm` / `llm_unguarded` (with `--llm`): the real rewrite prompt on an LLM, with and without
  the guard (`embedded` = the packaged 0.5B model, or an OpenAI-compatible base URL).

    nice -n 10 python benchmarks/followups.py [--llm embedded] [--hotpot 30]
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_io import header, write  # noqa: E402

from ragsieve import Config  # noqa: E402
from ragsieve.agent.answer import conversation  # noqa: E402
from ragsieve.agent.answer.conversation import Turn, anchored, rewrite_question  # noqa: E402
from ragsieve.agent.llm.client import LLM  # noqa: E402
from ragsieve.agent.orchestrator import Orchestrator  # noqa: E402
from ragsieve.testing import FakeChat  # noqa: E402
from ragsieve.tools.index.building.builder import IndexBuilder  # noqa: E402

DATA = REPO.parent / "shared" / "data"

# (first question, its answer, follow-up, stand-alone follow-up, gold pages)
LUMEN = [
    ("What scopes can a Lumen API key have?", "events:write, events:read, dashboards:read and admin.",
     "Which of those lets me rotate a key?", "Which role or scope is required to rotate a Lumen API key?",
     ["api-keys.md"]),
    ("How do I rotate the API key of a workspace?", "Run lumen keys rotate --key KEY_ID.",
     "And what happens to the old one?", "What happens to the old secret after a Lumen API key is rotated?",
     ["api-keys.md", "cli-reference.html"]),
    ("How do I rotate a key?", "lumen keys rotate; the old secret stays valid 24 hours.",
     "Can I make that period shorter?", "How do I shorten the grace period when rotating a Lumen key?",
     ["api-keys.md", "cli-reference.html"]),
    ("What does a 401 with key_revoked mean?", "The secret was revoked, e.g. after a rotation's grace period.",
     "What about a 403 with scope_missing?", "What does a 403 Forbidden with error code scope_missing mean?",
     ["troubleshooting.md"]),
    ("What are the rate limits of the Team plan?", "600 requests per minute with a burst of 100.",
     "What should my client do when it goes over them?", "What should a client do when it exceeds the Lumen rate limit (429)?",
     ["rate-limits.html", "troubleshooting.md"]),
    ("How are webhook deliveries signed?", "With an HMAC signature header.",
     "How do I rotate that secret?", "How do I rotate the Lumen webhook signing secret?",
     ["webhooks.md", "cli-reference.html"]),
    ("How do I install the Lumen CLI?", "pip install lumen-cli, or the standalone binary.",
     "How do I upgrade it later?", "How do I upgrade the Lumen CLI?", ["installation.md"]),
    ("How do I install the Lumen CLI?", "pip install lumen-cli.",
     "It hangs when I log in, what now?", "What to do when lumen login hangs?", ["troubleshooting.md"]),
    ("Where is the Lumen configuration file?", "In the user's config folder.",
     "Which regions can I set there?", "Which regions can be set in the Lumen configuration?",
     ["configuration.md"]),
    ("How long does Lumen keep data?", "It depends on the data retention setting.",
     "Can I change that per workspace?", "Can the Lumen data retention be changed per workspace?",
     ["configuration.md"]),
    ("How do I list my keys?", "lumen keys list shows ID, scopes, creation date and last use.",
     "How do I revoke one of them right away?", "How do I revoke a Lumen API key immediately?",
     ["api-keys.md", "cli-reference.html"]),
    ("What exit codes does the Lumen CLI use?", "0 success, 2 usage error, 3 auth error, 4 rate limited, 5 server.",
     "Which of them means I was rate limited?", "Which Lumen CLI exit code means rate limited after all retries?",
     ["cli-reference.html"]),
    ("Why are events missing from my dashboards?", "Check the ingest key's scope and the event timestamps.",
     "How do I collect diagnostics for support about it?", "How do I collect diagnostics for Lumen support?",
     ["troubleshooting.md"]),
]


def lumen_conversations() -> list[dict]:
    return [{"set": "lumen", "history": [Turn(role="user", text=q), Turn(role="assistant", text=a)],
             "follow_up": f, "oracle": o, "gold": gold} for q, a, f, o, gold in LUMEN]


def hotpot_conversations(limit: int) -> list[dict]:
    rows = [json.loads(x) for x in open(DATA / "hotpotqa" / "qa.jsonl", encoding="utf-8") if x.strip()]
    corpus = {d["_id"]: d for d in (json.loads(x) for x in open(DATA / "hotpotqa" / "corpus.jsonl", encoding="utf-8"))}
    out = []
    for r in rows:
        for title, doc in zip(r["gold_titles"], r["gold_doc_ids"]):
            entity = re.sub(r"\s*\(.*\)$", "", title)
            if len(entity) > 3 and entity in r["question"]:
                first_sentence = corpus[doc]["text"].split(". ")[0][:300]
                follow = r["question"].replace(entity, "it", 1)
                follow = follow[0].upper() + follow[1:]
                out.append({"set": "hotpotqa", "history": [Turn(role="user", text=f"What do you know about {entity}?"),
                                                            Turn(role="assistant", text=first_sentence)],
                            "follow_up": follow, "oracle": r["question"], "gold": r["gold_doc_ids"]})
                break
        if len(out) >= limit:
            break
    return out


def previous_question(history: list[Turn]) -> str:
    return next(t.text for t in reversed(history) if t.role == "user")


def recall(orch, query: str, gold: list[str], k: int, key) -> float:
    hits = orch.retrieve(query, top_k=k)
    found = {key(h.chunk) for h in hits}
    return sum(1 for g in gold if g in found) / len(gold)


def open_indexes(root: Path) -> dict[str, Path]:
    lumen = root / "lumen"
    if not (lumen / "CURRENT").exists():
        IndexBuilder(lumen, progress=False).build([str(REPO / "examples" / "docs")])
    hotpot = root / "hotpotqa"
    if not (hotpot / "CURRENT").exists():
        IndexBuilder(hotpot, progress=False).build([str(DATA / "hotpotqa" / "corpus.jsonl")])
    return {"lumen": lumen, "hotpotqa": hotpot}


def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hotpot", type=int, default=30, help="HotpotQA conversations (of 76 that can be built)")
    ap.add_argument("--llm", default=None, help="'embedded' or an OpenAI-compatible base URL: also measure the "
                                                "real rewrite prompt")
    ap.add_argument("--index-dir", type=Path, default=Path(tempfile.gettempdir()) / "ragsieve-followups")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "followups.json")
    args = ap.parse_args(argv)
    result = header() | {"commit": git_commit(), "what": __doc__.split("\n\n")[0]}
    convs = lumen_conversations() + hotpot_conversations(args.hotpot)
    folders = open_indexes(args.index_dir)
    config = Config()
    k = {"lumen": 3, "hotpotqa": 10}
    key = {"lumen": lambda c: Path(c.source).name, "hotpotqa": lambda c: c.doc_id}
    real = None
    if args.llm:
        from ragsieve.agent.config import LLMConfig
        from ragsieve.agent.llm.factory import open_llm

        cfg = LLMConfig(timeout_s=300, max_retry_s=300) if args.llm == "embedded" else LLMConfig(base_url=args.llm)
        real, close_llm = open_llm(cfg)
    rows = []
    started = time.monotonic()
    orchs = {name: Orchestrator.open(folder, config, chat=FakeChat(default="")) for name, folder in folders.items()}
    try:
        for c in convs:
            orch, hist, f = orchs[c["set"]], c["history"], c["follow_up"]
            copier = LLM(FakeChat(default=previous_question(hist)))
            guarded, note = rewrite_question(f, hist, copier, orch.prompts)
            queries = {"raw": f, "previous": previous_question(hist), "guard_on_previous": guarded,
                       "anchored": anchored(f, hist), "oracle": c["oracle"]}
            row = {"set": c["set"], "follow_up": f, "guard_fired_on_previous": note is not None}
            if real is not None:
                t0 = time.monotonic()
                keep = conversation.KEEP_MIN
                try:
                    conversation.KEEP_MIN = 0.0
                    unguarded, _ = rewrite_question(f, hist, real.fork(), orch.prompts)
                finally:
                    conversation.KEEP_MIN = keep
                queries["llm_unguarded"] = unguarded
                queries["llm"], llm_note = (rewrite_question(f, hist, LLM(FakeChat(default=unguarded)), orch.prompts))
                row.update(llm_rewrite=unguarded, llm_guard_fired=llm_note is not None,
                           llm_seconds=round(time.monotonic() - t0, 2))
            row["recall"] = {name: recall(orch, q, c["gold"], k[c["set"]], key[c["set"]]) for name, q in queries.items()}
            row["queries"] = queries
            rows.append(row)
    finally:
        for orch in orchs.values():
            orch.close()
        if real is not None:
            close_llm()
    names = list(rows[0]["recall"])
    summary = {}
    for subset in ("lumen", "hotpotqa", "all"):
        part = [r for r in rows if subset == "all" or r["set"] == subset]
        summary[subset] = {"conversations": len(part), **{f"recall_{n}": round(sum(r["recall"][n] for r in part)
                                                                               / len(part), 4) for n in names}}
        summary[subset]["guard_fired_on_previous"] = sum(r["guard_fired_on_previous"] for r in part)
        if real is not None:
            summary[subset]["llm_guard_fired"] = sum(r["llm_guard_fired"] for r in part)
    result.update(k=k, llm=args.llm or "none (scripted rewriters only)", summary=summary, rows=rows,
                  seconds=round(time.monotonic() - started, 1))
    print(json.dumps(summary, indent=2))
    return write(result, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
