"""Figures inside docs pages, generated between markers that Markdown renders invisibly (HTML comments):

    ... both gold paragraphs <!-- fig:hotpot-full -->99.0 % of questions at ...<!-- /fig --> ...

`fill` replaces each marker's body with what the figure function registered under its name (`figure`) gives
today; words after the name are the function's arguments (`<!-- fig:chain hotpotqa oracle -->`). A figure
function reads result files through `Results`, which refuses a missing or unreadable file and a pipeline result
of an earlier `full` plan (`report_figure_rows.load_result`, as the README table does): the body then says
which file and why ("re-run it") instead of a figure. A marker may hold a block (a table): its body then starts
and ends with a blank line, and only a block marker may start a line, indented or not (a line starting with `<!--` inside a
paragraph would turn that line into raw HTML).
"""
from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Sequence
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

from report_figure_rows import Data, load_result

OPEN = "<!-- fig:"
CLOSE = "<!-- /fig -->"
MARK = re.compile(r"<!-- fig:(?P<name>[a-z0-9-]+)(?P<args>(?: [A-Za-z0-9_.+-]+)*) -->(?P<body>.*?)<!-- /fig -->", re.S)


class Unavailable(Exception):
    """A result file a figure needs is missing, unreadable, or ran an earlier plan."""

    def __init__(self, file: str, why: str) -> None:
        super().__init__(f"{file}: {why}")
        self.file, self.why = file, why


class Results:
    """The result files of one folder, each read once; `results(name)` is the file's data or `Unavailable`."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._seen: dict[str, tuple[Data | None, str]] = {}
        self.last = ""

    def __call__(self, name: str) -> Data:
        if name not in self._seen:
            self._seen[name] = load_result(self.folder, name)
        self.last = name
        data, why = self._seen[name]
        if data is None:
            raise Unavailable(name, why)
        return data


Render = Callable[..., str]  # (results, *marker arguments) -> the marker's body
FIGURES: dict[str, Render] = {}


def figure(name: str) -> Callable[[Render], Render]:
    """Register a figure function under a marker name."""
    def register(fn: Render) -> Render:
        if name in FIGURES:
            raise ValueError(f"figure {name!r} is registered twice")
        FIGURES[name] = fn
        return fn
    return register


READ_ERRORS = (KeyError, TypeError, ValueError, StopIteration, ZeroDivisionError, IndexError, AttributeError)


def render(name: str, args: list[str], results: Results) -> str:
    """The body of one marker; a ValueError for an unknown name or the wrong number of arguments."""
    fn = FIGURES.get(name)
    if fn is None:
        raise ValueError(f"unknown figure {name!r} (known: {', '.join(sorted(FIGURES))})")
    try:
        inspect.signature(fn).bind(results, *args)
    except TypeError as exc:
        raise ValueError(f"figure {name!r} with arguments {args}: {exc}") from exc
    try:
        return fn(results, *args)
    except Unavailable as gone:
        return f"(not shown: `{gone.file}` {gone.why})"
    except READ_ERRORS as exc:  # the file does not hold what the figure reads
        return f"(not shown: `{results.last}` unreadable, {type(exc).__name__}: {exc})"


def fill(text: str, results: Results) -> str:
    """`text` with every marker's body regenerated; a ValueError for a marker that is not closed, nested, or
    (an inline one) starts a line."""
    found = list(MARK.finditer(text))
    if text.count(OPEN) != len(found) or text.count(CLOSE) != len(found):
        raise ValueError(f"unbalanced figure markers: {text.count(OPEN)} `{OPEN}`, {text.count(CLOSE)} `{CLOSE}`")
    out, at = [], 0
    for m in found:
        name, args = m["name"], m["args"].split()
        body = render(name, args, results)
        starts_line = not text[text.rfind("\n", 0, m.start()) + 1:m.start()].strip()  # only blanks before it
        block = "\n" in body
        if block:
            body = "\n\n" + body.strip("\n") + "\n\n"
        elif starts_line:
            raise ValueError(f"inline figure {name!r} starts a line: Markdown would show that line as raw HTML")
        if any(line.lstrip().startswith("<!--") for line in body.splitlines()):
            raise ValueError(f"figure {name!r} gives a line starting with `<!--`")
        out += [text[at:m.start()], m.group(0)[:m.start("body") - m.start()], body, CLOSE]
        at = m.end()
    return "".join(out) + text[at:]


def names(text: str) -> list[str]:
    """The figure names a page uses, in order."""
    return [m["name"] for m in MARK.finditer(text)]


# Wording shared by the figure functions.

def pct(value: float, digits: int = 1) -> str:
    return f"{value * 100:.{digits}f} %"


def f3(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def count(value: float) -> str:
    """A count or a mean of counts: thousands separated, no decimals."""
    return f"{value:,.0f}"


def chain(values: Sequence[float | None], digits: int = 3) -> str:
    return " → ".join(f3(v, digits) for v in values)


def slashed(values: Sequence[float | None], digits: int = 3) -> str:
    return " / ".join(f3(v, digits) for v in values)


def compare(a: float, b: float, above: str, below: str, same: str, digits: int = 3) -> str:
    """The word for a against b, at the precision shown (so 0.9484 and 0.9480 shown as 0.948 read `same`)."""
    ra, rb = round(a, digits), round(b, digits)
    return above if ra > rb else below if ra < rb else same


def fixed(value: float, digits: int) -> str:
    """`value` rounded half up as written in the file (0.015 -> '0.02', 0.7145 -> '0.715'), as by hand."""
    quantum = Decimal(1).scaleb(-digits)
    return str(Decimal(repr(float(value))).quantize(quantum, rounding=ROUND_HALF_UP))


def signed(value: float, digits: int = 4) -> str:
    """A difference with its sign; zero without one ('-0.0010', '0.0000', '+0.0022')."""
    shown = fixed(value, digits)
    return shown if float(shown) == 0 else ("+" + shown if value > 0 else shown)


def span(values: list[float], digits: int = 1) -> str:
    """'lo-hi' of the values at the precision shown; one value when they round alike."""
    lo, hi = fixed(min(values), digits), fixed(max(values), digits)
    return lo if lo == hi else f"{lo}-{hi}"
