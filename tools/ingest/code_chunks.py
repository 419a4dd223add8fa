"""Syntax-aware code chunks: the cAST algorithm over a tree-sitter parse, with enclosing symbols.

cAST (Zhang et al. 2025, "cAST: Enhancing Code Retrieval-Augmented Generation
with Structural Chunking via Abstract Syntax Tree", arXiv 2506.15655): a node
that fits the budget is one chunk; a larger node is split into its children,
recursively, and adjacent small siblings are merged greedily while they fit.
Here the unit is the source line (citations are line spans), so a node is
the line range from its first line to the first line of its next sibling,
and the chunks tile the file. A leaf range still over the budget (one huge
statement, a minified line) falls back to the line chunker, which keeps the
token and character bounds.

Every chunk records its enclosing definitions (`Class > method`) and the
definitions it holds; `symbol_label` turns them into the `Class.method` of a
citation and the header that BM25 and the embedding see. Grammars come from
`tree-sitter-language-pack` (the 0.x wheels bundle them; 1.x downloads them
at run time, which an offline machine cannot); a file whose language has no
grammar, or when the package is missing, gets `None` and the line chunker.
"""
from __future__ import annotations

import bisect
import logging
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

LANGUAGES = {
    ".py": "python", ".js": "javascript", ".jsx": "javascript", ".mjs": "javascript", ".ts": "typescript",
    ".tsx": "tsx", ".go": "go", ".java": "java", ".rs": "rust", ".c": "c", ".h": "c", ".cpp": "cpp",
    ".cc": "cpp", ".hpp": "cpp", ".cs": "csharp", ".rb": "ruby", ".php": "php", ".kt": "kotlin",
    ".swift": "swift", ".scala": "scala", ".sh": "bash",
}
DEFINITIONS = frozenset({
    "function_definition", "class_definition", "function_declaration", "method_definition", "class_declaration",
    "method_declaration", "interface_declaration", "constructor_declaration", "enum_declaration",
    "type_spec", "function_item", "impl_item", "struct_item", "trait_item", "enum_item", "mod_item",
    "struct_specifier", "class_specifier", "namespace_definition", "abstract_class_declaration",
    "generator_function_declaration", "module", "class", "method", "singleton_method", "object_declaration",
    "record_declaration", "trait_declaration", "function_signature", "method_signature",
})
_NAME_FIELDS = ("name", "type", "declarator")


@dataclass
class Definition:
    start: int  # 0-based first line
    end: int  # 0-based last line
    path: tuple[str, ...]  # enclosing names, outermost first, this one last


@dataclass
class CodeSpan:
    """Lines [start, end) of the file (0-based) and the symbols around and inside them."""

    start: int
    end: int
    enclosing: tuple[str, ...] = ()
    members: list[str] = field(default_factory=list)


def language_of(source: str) -> str | None:
    dot = source.rfind(".")
    return LANGUAGES.get(source[dot:].lower()) if dot >= 0 else None


def _parser(language: str):
    try:
        import tree_sitter_language_pack as pack
    except ImportError:
        log.debug("tree-sitter-language-pack not installed: line chunking for %s", language)
        return None
    try:
        return pack.get_parser(language)
    except Exception as exc:  # noqa: BLE001 - any grammar problem means "no grammar": the line chunker
        log.debug("no tree-sitter grammar for %s: %s", language, exc)
        return None


def _name(node) -> str | None:
    for key in _NAME_FIELDS:
        child = node.child_by_field_name(key)
        depth = 0
        while child is not None and depth < 8:
            if child.type in ("identifier", "type_identifier", "field_identifier", "name", "constant",
                              "property_identifier", "simple_identifier", "qualified_identifier",
                              "namespace_identifier", "package_identifier"):
                return child.text.decode("utf-8", "replace")
            child = child.child_by_field_name("declarator") or child.child_by_field_name("name") \
                or (child.named_children[0] if child.named_children else None)
            depth += 1
    return None


def definitions(root) -> list[Definition]:
    """Every named definition in the tree, in source order, with its enclosing names."""
    found: list[Definition] = []
    stack = [(root, ())]
    while stack:
        node, path = stack.pop()
        if node.type in DEFINITIONS and (name := _name(node)):
            path = path + (name,)
            found.append(Definition(node.start_point[0], node.end_point[0], path))
        stack.extend((c, path) for c in reversed(node.children))
    found.sort(key=lambda d: (d.start, -d.end))
    return found


class _Splitter:
    def __init__(self, line_tokens: list[int], budget: int) -> None:
        self.prefix = [0]
        for t in line_tokens:
            self.prefix.append(self.prefix[-1] + t)
        self.budget = budget

    def size(self, a: int, b: int) -> int:
        return self.prefix[b] - self.prefix[a]

    def split(self, node, a: int, b: int) -> list[tuple[int, int]]:
        """cAST over lines [a, b) covered by `node`: fit -> one range; else children, merged greedily."""
        if self.size(a, b) <= self.budget or b - a <= 1:
            return [(a, b)]
        starts: list[tuple[int, object]] = []
        for child in node.children:
            row = max(a, child.start_point[0])
            if row >= b:
                break
            if starts and starts[-1][0] == row:
                if child.end_point[0] > starts[-1][1].end_point[0]:
                    starts[-1] = (row, child)  # the child reaching furthest speaks for the line
                continue
            starts.append((row, child))
        if not starts:
            return [(a, b)]
        if starts[0][0] > a:
            starts.insert(0, (a, None))
        if len(starts) == 1:
            only = starts[0][1]
            return [(a, b)] if only is None or only is node else self.split(only, a, b)
        segments = []
        for i, (row, child) in enumerate(starts):
            end = starts[i + 1][0] if i + 1 < len(starts) else b
            segments.append((row, end, child))
        out: list[tuple[int, int]] = []
        run_start = run_end = None
        for s, e, child in segments:
            if self.size(s, e) > self.budget:
                if run_start is not None:
                    out.append((run_start, run_end))
                    run_start = None
                out.extend(self.split(child, s, e) if child is not None else [(s, e)])
                continue
            if run_start is not None and self.size(run_start, e) <= self.budget:
                run_end = e
            else:
                if run_start is not None:
                    out.append((run_start, run_end))
                run_start, run_end = s, e
        if run_start is not None:
            out.append((run_start, run_end))
        return out


def _annotate(spans: list[tuple[int, int]], defs: list[Definition], line_tokens: list[int]) -> list[CodeSpan]:
    """Each span's innermost enclosing definition (one starting within 2 lines of its first code line
    counts: decorators, comments) and the definitions directly inside it that start in the span."""
    out = []
    for a, b in spans:
        first = next((i for i in range(a, b) if line_tokens[i]), a)
        last = next((i for i in range(b - 1, a - 1, -1) if line_tokens[i]), b - 1)
        around = [d for d in defs if d.start <= first + 2 and d.end >= last and d.start <= last]
        enclosing = max((d.path for d in around), key=len, default=())
        inside = [d.path[-1] for d in defs if first <= d.start <= last and len(d.path) == len(enclosing) + 1
                  and d.path[:-1] == enclosing]
        out.append(CodeSpan(a, b, enclosing, inside))
    return out


def code_spans(text: str, source: str, line_tokens: list[int], budget: int) -> list[CodeSpan] | None:
    """The cAST line ranges of `text` with their symbols; None when no grammar parses this language."""
    language = language_of(source)
    parser = _parser(language) if language else None
    if parser is None:
        return None
    tree = parser.parse(text.encode("utf-8"))
    n_lines = len(line_tokens)
    spans = _Splitter(line_tokens, budget).split(tree.root_node, 0, n_lines)
    spans = _merge_blank(spans, line_tokens)
    return _annotate(spans, definitions(tree.root_node), line_tokens)


def _merge_blank(spans: list[tuple[int, int]], line_tokens: list[int]) -> list[tuple[int, int]]:
    """Join a span holding no tokens (blank lines) to the one before it, keeping the tiling."""
    out: list[tuple[int, int]] = []
    for a, b in spans:
        if out and sum(line_tokens[a:b]) == 0:
            out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


def symbol_label(span: CodeSpan, limit: int = 3) -> str:
    """`Class.method`, or `Class: a, b, c` when the chunk holds several definitions; '' at module level."""
    head = ".".join(span.enclosing)
    if not span.members:
        return head
    members = span.members[:limit] + (["..."] if len(span.members) > limit else [])
    if len(span.members) == 1:
        return f"{head}.{members[0]}" if head else members[0]
    return f"{head}: {', '.join(members)}" if head else ", ".join(members)


def line_of(offsets: list[int], char: int) -> int:
    """0-based line of character `char` given the sorted start offsets of each line."""
    return bisect.bisect_right(offsets, char) - 1
