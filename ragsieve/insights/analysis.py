"""The insights as pure functions over logged questions: topic groups, weekly trends, cited and unreached documents.

Grouping follows the usual recipe for short texts (sentence embeddings, then
agglomerative clustering with a distance threshold instead of a fixed number of
clusters; scikit-learn's `AgglomerativeClustering`, average linkage on cosine
distance). Identical questions are clustered once, weighted by their count. At
most `max_cluster` distinct questions are clustered (the most recent); the
others join the group whose centroid is nearest, when it is within the same
distance, so the cost stays bounded whatever the log holds.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

MAX_CLUSTER = 3000


@dataclass
class Group:
    """Questions about one topic. `members`: indices into the questions given to `group_questions`."""

    label: str  # the most central question (highest mean similarity to the group)
    members: list[int] = field(default_factory=list)
    texts: Counter[str] = field(default_factory=Counter)


def normalise(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1.0, norms)


def group_questions(texts: list[str], vectors: np.ndarray, distance: float, max_cluster: int = MAX_CLUSTER) -> list[Group]:
    """Topic groups of `texts` (oldest first; `vectors` one row each), biggest first."""
    if not texts:
        return []
    from sklearn.cluster import AgglomerativeClustering

    vectors = normalise(vectors)
    first: dict[str, int] = {}
    for i in range(len(texts) - 1, -1, -1):  # the most recent occurrence stands for a text
        first.setdefault(texts[i], i)
    uniq = sorted(first.values(), reverse=True)
    core, rest = uniq[:max_cluster], uniq[max_cluster:]
    where = {texts[i]: n for n, i in enumerate(core)}
    if len(core) == 1:
        labels = np.zeros(1, dtype=int)
    else:
        model = AgglomerativeClustering(n_clusters=None, distance_threshold=distance, metric="cosine", linkage="average")
        labels = model.fit_predict(vectors[core])
    n_groups = int(labels.max()) + 1
    weights = Counter(texts)
    centroids = np.zeros((n_groups, vectors.shape[1]), dtype=np.float32)
    for n, i in enumerate(core):
        centroids[labels[n]] += vectors[i] * weights[texts[i]]
    centroids = normalise(centroids)
    assigned: dict[str, int] = {texts[i]: int(labels[n]) for n, i in enumerate(core)}
    if rest:
        sims = vectors[rest] @ centroids.T
        best = sims.argmax(axis=1)
        for i, g, s in zip(rest, best, sims[np.arange(len(rest)), best]):
            if 1.0 - float(s) <= distance:
                assigned[texts[i]] = int(g)
    groups = [Group(label="") for _ in range(n_groups)]
    for i, text in enumerate(texts):
        g = assigned.get(text)
        if g is not None:
            groups[g].members.append(i)
            groups[g].texts[text] += 1
    for g, group in enumerate(groups):
        distinct = [t for t in group.texts if t in where]
        centrality = vectors[[first[t] for t in distinct]] @ centroids[g]
        group.label = distinct[int(np.argmax(centrality))]
    return sorted((g for g in groups if g.members), key=lambda g: (-len(g.members), g.label))


def week_of(at: float) -> str:
    """The Monday (UTC, ISO date) of the week `at` falls in."""
    day = dt.datetime.fromtimestamp(at, dt.timezone.utc).date()
    return (day - dt.timedelta(days=day.weekday())).isoformat()


def weekly(times: list[float], since: float, until: float) -> list[tuple[str, int]]:
    """(week, count) for every week from `since` to `until`, empty weeks included."""
    counts = Counter(week_of(t) for t in times)
    out, day = [], dt.date.fromisoformat(week_of(since))
    last = dt.date.fromisoformat(week_of(until))
    while day <= last:
        out.append((day.isoformat(), counts.get(day.isoformat(), 0)))
        day += dt.timedelta(days=7)
    return out


def doc_of(chunk_id: str) -> str:
    return chunk_id.rpartition("#")[0] or chunk_id


def cited_documents(citations: list[list[dict]]) -> Counter[str]:
    """How many answers cited each document (a document counts once per answer; retrieved-only not counted)."""
    counts: Counter[str] = Counter()
    for cites in citations:
        counts.update({doc_of(c["chunk_id"]) for c in cites if c.get("cited", True)})
    return counts


def unreached_documents(documents: list[str], citations: list[list[dict]]) -> list[str]:
    """The documents no question's reply reached (neither cited nor listed as retrieved), in index order."""
    reached = {doc_of(c["chunk_id"]) for cites in citations for c in cites}
    return [d for d in documents if d not in reached]
