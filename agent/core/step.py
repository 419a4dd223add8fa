"""A step, what it returns and what it may use (pydantic-graph style).

A step is a small class with one `run(state, deps)` method that mutates the serialisable `RunState` and returns a
`StepResult` whose `outcome` the plan maps to the next step. Its outcomes are a type: `Step[Grown, GrownEdges]`
declares them, with `Grown = Literal["grew", "converged"]` (`Step.outcomes` is read from it) and `GrownEdges` a
`TypedDict` with one required key per outcome (`NextEdges`, the default, for `Step[Next]`). `run` returns
`StepResult[Grown]` and a plan's edges are written `Expand.on({"grew": Judge, "converged": Conformal})`, typed
`GrownEdges`, so mypy refuses a returned outcome the step does not declare, a mapped one it does not declare, and
an edge map that leaves one of its outcomes unmapped. That the two types list the same outcomes is checked when
the step class is made (a `TypeError` on import). `END` (its own value, never a step's name) stops the run; a plan
written as data (`PlanSpec`, a config's `[plans.NAME]`) spells it "end" and is checked by `validate_plan` instead.
Clients, indexes and templates are dependencies (`Deps`), never part of the state.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import (
    Any,
    Callable,
    ClassVar,
    Generic,
    Literal,
    Mapping,
    Sequence,
    TypedDict,
    Union,
    cast,
    get_args,
    get_origin,
    is_typeddict,
)

from pydantic import BaseModel
from typing_extensions import TypeVar  # a TypeVar with a default (PEP 696) on Python 3.10 too

from ragsieve.agent.config import Config
from ragsieve.agent.core.caches import StepCaches
from ragsieve.agent.core.contracts import MeteredLLM, Prompts, Retriever
from ragsieve.agent.core.state import RunState
from ragsieve.agent.errors import UsageError
from ragsieve.tools.index.backend import IndexBackend


class End(enum.Enum):
    """Where a plan stops: a transition's target that is no step."""

    END = "end"


END = End.END
Next = Literal["next"]  # the outcome of a step that always goes on to one place
Outcome = TypeVar("Outcome", bound=str)
Target = Union["type[Step[Any, Any]]", End]  # where an outcome leads: a step class, or END


class NextEdges(TypedDict):
    """The edges of a `Step[Next]`: where its one outcome leads."""

    next: Target


# a step's edges: a TypedDict with one required key per outcome (mypy: every outcome mapped, no other)
EdgesOf = TypeVar("EdgesOf", bound=Mapping[str, object], default=NextEdges)


@dataclass
class StepResult(Generic[Outcome]):
    """The step's outcome (one of its declared ones) and its summary for the trace: a model where the step
    has one (`agent.core.summaries`, the judge's `JudgeRoundReport`), else a dict (answer, validate, fallback,
    expand's `converged`)."""

    outcome: Outcome
    summary: dict[str, Any] | BaseModel = field(default_factory=dict)

    def summary_dict(self) -> dict[str, Any]:
        """The summary as the trace's JSON holds it (a model's fields in their order)."""
        return self.summary.model_dump() if isinstance(self.summary, BaseModel) else self.summary


@dataclass
class Deps:
    """What steps use but do not own, typed over protocols (`ragsieve.agent.core.contracts`): the index
    (`IndexBackend`), the retriever, the metered model client (`agent.llm.LLM`) and the prompt templates.
    `index` / `retriever` / `llm` are None only where a caller runs steps that need none of them (answering
    over a given context; tests): a step that needs one asks `need_index()` and so on. `caches` keeps what
    steps compute once, shared by the questions of one orchestrator."""

    config: Config
    retriever: Retriever | None
    index: IndexBackend | None
    llm: MeteredLLM | None
    prompts: Prompts
    caches: StepCaches = field(default_factory=StepCaches)
    # streaming (the service): step events as they finish, the answer's tokens as the model writes them
    on_event: Callable[[str, dict[str, Any]], None] | None = None
    on_token: Callable[[str], None] | None = None
    answer_options: dict[str, Any] = field(default_factory=dict)  # max_tokens / temperature of the answer call

    def emit(self, kind: str, data: dict[str, Any]) -> None:
        if self.on_event is not None:
            self.on_event(kind, data)

    def need_index(self) -> IndexBackend:
        if self.index is None:
            raise UsageError("this step needs an index, and none is open")
        return self.index

    def need_retriever(self) -> Retriever:
        if self.retriever is None:
            raise UsageError("this step needs a retriever, and none is given")
        return self.retriever

    def admitted(self, rows: Sequence[int]) -> list[int]:
        """`rows` narrowed to those the question's metadata filter admits (all of them without a retriever)."""
        return self.retriever.admit(rows) if self.retriever is not None else list(rows)

    def need_llm(self) -> MeteredLLM:
        if self.llm is None:
            raise UsageError("this step calls the model, and no model client is given")
        return self.llm


@dataclass(frozen=True)
class Edges:
    """One step's transitions: each of its outcomes and where it leads (`Step.on`)."""

    step: type[Step[Any, Any]]
    targets: dict[str, Target]


class Step(Generic[Outcome, EdgesOf]):
    """Base class: subclasses set `name`, declare their outcomes and edges as the type arguments (`Step[Next]`,
    `Step[Grown, GrownEdges]`) and implement `run`."""

    name: ClassVar[str] = ""
    outcomes: ClassVar[tuple[str, ...]] = ("next",)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for base in getattr(cls, "__orig_bases__", ()):
            args = get_args(base) if get_origin(base) is Step else ()
            if args and get_origin(args[0]) is Literal:
                declared = tuple(get_args(args[0]))
                if "outcomes" in vars(cls) and tuple(vars(cls)["outcomes"]) != declared:
                    raise TypeError(f"{cls.__name__}: outcomes {vars(cls)['outcomes']} differ from its type {declared}")
                cls.outcomes = declared
                edges = args[1] if len(args) > 1 else NextEdges
                if is_typeddict(edges) and set(edges.__required_keys__) != set(declared):
                    raise TypeError(
                        f"{cls.__name__}: its edges {edges.__name__} map {sorted(edges.__required_keys__)}, "
                        f"its outcomes are {sorted(declared)}"
                    )

    def run(self, state: RunState, deps: Deps) -> StepResult[Outcome]:  # pragma: no cover - interface
        raise NotImplementedError

    @classmethod
    def check_config(cls, config: Config) -> None:
        """Raise UsageError for settings this step would refuse at run time (called before any call)."""

    @classmethod
    def on(cls, edges: EdgesOf) -> Edges:
        """This step's transitions, typed by its edges (mypy refuses an outcome it does not declare, and a map
        that leaves one of its outcomes out)."""
        return Edges(cls, {str(outcome): cast(Target, target) for outcome, target in edges.items()})
