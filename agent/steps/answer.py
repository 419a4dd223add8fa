"""Answer from the current context (the plan's last word), deciding abstention with calibrated evidence."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable

import numpy as np

from ragsieve.agent.answer.also_retrieved import with_also_retrieved
from ragsieve.agent.answer.answering import (
    NO_EVIDENCE,
    abstention_answer,
    answer_from_context,
    answers_and_abstains,
    is_abstention,
    passages_answer,
)
from ragsieve.agent.answer.grounding import ABSTENTIONS, cited_in_text
from ragsieve.agent.core.conformal_signal import query_vector
from ragsieve.agent.core.evidence import cached_calibration
from ragsieve.agent.core.state import Abstention, RunState
from ragsieve.agent.core.step import Deps, Next, Step, StepResult
from ragsieve.tools.filters.abstention import says_answerable
from ragsieve.tools.index.search.dense import corpus_similarities

logger = logging.getLogger(__name__)


def answerability(state: RunState, deps: Deps) -> dict:
    """The calibrated abstention decision's inputs: the question's answerability score (top-1
    cosine over the whole index, or over the rows the question's metadata filter admits), the cutoff at `abstention.max_false_answer`, and the verdict.
    Without an abstention calibration (or index vectors) the verdict is None: the model's
    abstention stands."""
    cal = cached_calibration(deps)[0]
    eps = deps.config.abstention.max_false_answer
    if cal is None or cal.abstention is None:
        return {"answerable": None, "why": "no abstention calibration (`ragsieve calibrate`): the model decides"}
    index = deps.index
    vectors = index.vectors if index is not None else None
    if index is None or vectors is None or not len(vectors):
        return {"answerable": None, "why": "the index has no vectors to score the question: the model decides"}
    sims = corpus_similarities(vectors, query_vector(state, deps))
    where = deps.retriever.where if deps.retriever is not None else None  # only the rows it admits can answer
    if where is not None:
        sims = sims[np.asarray(index.filter_rows(where), dtype=np.int64)]
    if not sims.size:
        return {
            "answerable": False,
            "score": None,
            "max_false_answer": eps,
            "why": "the metadata filter admits no passage: the model's abstention stands",
        }
    score = float(np.max(sims))
    threshold = cal.abstention.threshold(eps)
    verdict = says_answerable(score, threshold)
    return {
        "answerable": verdict,
        "score": round(score, 6),
        "max_false_answer": eps,
        "threshold": None if math.isinf(threshold) else round(threshold, 6),
        "origin": cal.abstention.origin,
        "why": f"top-1 cosine {score:.4f} {'>' if verdict else '<='} cutoff "
        f"{'inf' if math.isinf(threshold) else f'{threshold:.4f}'} (false-answer rate <= {eps})",
    }


def closest(state: RunState) -> list:
    """The closest passages when the context is empty: the pool, best score first."""
    return sorted(state.pool.values(), key=lambda h: -(h.score or 0.0))


def send_rest(text: str, streamed: str, on_token: Callable[[str], None]) -> None:
    """Send what the stream has not: the stream releases only text that cannot change, so the final
    answer always begins with it (a reused draft was not streamed: it is sent whole)."""
    if not text.startswith(streamed):  # a bug: logged, and nothing is sent twice
        logger.warning("the answer no longer begins with the %d characters already streamed", len(streamed))
    elif len(text) > len(streamed):
        on_token(text[len(streamed) :])


class Answer(Step[Next]):
    """Sets `state.answer` and `state.citations` from `state.context` (best first).

    Abstention is a calibrated decision, never inferred from a non-empty conformal set
    (CONFLARE calibrates on answerable questions, so its set is never empty):
    - an empty context gives `NO_EVIDENCE` without a model call (`abstention = "no_evidence"`);
    - so does a judge trusted for this question that called every chunk it judged irrelevant (it passed
      its decoys and order check; `RunState.nothing_relevant`), unless the calibrated answerability score
      says the question is answerable (then, or without an abstention calibration, the model reads the
      context as below); the context is listed as the closest passages. An untrusted judge's verdicts
      never cause an abstention: the model reads the context;
    - a model that abstains keeps its abstention (`abstention = "model"`), unless the calibrated
      answerability score says the question is answerable at `abstention.max_false_answer`
      (`ragsieve.tools.filters.abstention`); then the reply is the most relevant passages,
      labelled as not a generated answer (`abstention = "passages"`, `abstention.overrule`);
    - every abstention still lists the closest passages (`abstention.passages`), marked as not
      an answer, after the abstention sentence;
    - a reply that both answers and abstains is marked `abstention = "mixed"`;
    - under `abstention.strict`, a reply citing none of the passages is replaced by the abstention with the
      closest passages (`abstention = "ungrounded"`); its text was never streamed (`hold_uncited`);
    - the reply's sources also list the context's top `abstention.also_retrieved` passages it did not
      cite, marked in the text as retrieved, not cited (`ragsieve.agent.answer.also_retrieved`).
    When a draft was already written from exactly this context, it is reused.
    """

    name = "answer"

    def run(self, state: RunState, deps: Deps) -> StepResult[Next]:
        context_ids = [h.chunk_id for h in state.context]
        listed = deps.config.abstention.passages
        state.abstention = None
        if not state.context:
            state.answer, state.citations = with_also_retrieved(
                *abstention_answer(closest(state), listed, head=NO_EVIDENCE),
                closest(state),
                deps.config.abstention.also_retrieved if listed else 0,
            )
            state.abstention, state.citations_inferred = Abstention.NO_EVIDENCE, False
            return StepResult("next", {"context": [], "abstention": "no_evidence", "llm": False})
        report: dict = {"context": context_ids, "order": deps.config.loop.context_order}
        if state.nothing_relevant:  # a trusted judge found nothing relevant: abstain unless calibrated evidence objects
            decision = answerability(state, deps)
            report["answerability"] = decision
            if decision["answerable"] is False:
                state.answer, state.citations = with_also_retrieved(
                    *abstention_answer(state.context, listed, head=NO_EVIDENCE),
                    state.context,
                    deps.config.abstention.also_retrieved if listed else 0,
                )
                state.abstention, state.citations_inferred = Abstention.NO_EVIDENCE, False
                report.update(
                    {
                        "abstention": "no_evidence",
                        "llm": False,
                        "nothing_relevant": (
                            "a judge trusted for this question called none of the judged chunks relevant and the calibrated "
                            "answerability score does not say answerable: abstained without asking the model"
                        ),
                    }
                )
                return StepResult("next", report)
            report["nothing_relevant"] = "a judge trusted for this question called none of the judged chunks relevant, but " + (
                "the calibrated answerability score says answerable: the model reads the context"
                if decision["answerable"]
                else "there is no calibrated answerability verdict: the model decides"
            )
        streamed = ""  # the part of the answer already sent to `deps.on_token`
        if state.draft is not None and state.draft_context == context_ids:
            text, citations = state.draft, [c.model_copy() for c in state.draft_citations]
            report["reused_draft"] = True
        else:
            attempt = sum(1 for e in state.trace if e.step == self.name) + 1
            deps.emit("answer", {"attempt": attempt, "context": context_ids})
            options = deps.answer_options
            asked: dict = {}
            text, citations = answer_from_context(
                state.question,
                state.context,
                deps,
                order=deps.config.loop.context_order,
                report=asked,
                instructions=state.instructions,
                on_token=deps.on_token,
                max_tokens=options.get("max_tokens"),
                temperature=options.get("temperature"),
                asked=state.asked,
                history=state.history,
                hold_uncited=deps.config.abstention.strict,
            )
            state.citations_inferred = bool(asked.get("citations_inferred"))
            streamed = asked.get("streamed", "")
            state.truncated = asked.get("finish_reason") == "length"
            if asked.get("window_cut"):  # the endpoint refused the whole context: say what the answer read
                cut = report["window_cut"] = asked["window_cut"]
                note = (
                    f"the model's context window ({cut.get('window_tokens') or 'its size not given'} tokens) "
                    f"refused the whole context: the answer read the best {cut['sent']} of {cut['passages']} "
                    "passages, so the context's coverage is not guaranteed for this answer"
                )
                if note not in state.notes:
                    state.notes.append(note)
        if is_abstention(text):
            decision = answerability(state, deps)
            report["answerability"] = decision
            if decision["answerable"] and deps.config.abstention.overrule == "passages":
                text, citations = passages_answer(state.context, max(1, listed))
                state.abstention = Abstention.PASSAGES
            else:
                text, citations = abstention_answer(state.context, listed)
                state.abstention = Abstention.MODEL
            state.citations_inferred = False
        elif answers_and_abstains(text):
            state.abstention = Abstention.MIXED
        uncited = not cited_in_text(text, citations) and not state.citations_inferred  # inferred: listed, no marker
        if deps.config.abstention.strict and state.abstention in (None, Abstention.MIXED) and uncited:
            text, citations = abstention_answer(state.context, listed)  # strict: an answer citing nothing is not shown
            state.abstention, state.citations_inferred = Abstention.UNGROUNDED, False
            report["strict"] = "the answer cited no passage: replaced by the abstention"
        also = deps.config.abstention.also_retrieved if listed or not state.abstention else 0  # passages = 0: none
        text, citations = with_also_retrieved(text, citations, state.context, also)
        if deps.on_token is not None:
            send_rest(text, streamed, deps.on_token)
        state.answer, state.citations = text, citations
        cited = [] if state.abstention in ABSTENTIONS else cited_in_text(text, citations)  # listed passages: not cited
        if state.citations_inferred:  # no marker in the text: the inferred ones (`origin` "inferred")
            cited = [c for c in citations if c.cited and c.origin == "inferred"]
        report.update(
            {"cited": [c.chunk_id for c in cited], "abstention": state.abstention, "citations_inferred": state.citations_inferred}
        )
        return StepResult("next", report)
