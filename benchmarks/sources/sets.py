"""Question sets of benchmarks/sources/main.py, written from the code and the pages themselves (nothing hand-tuned):

- code, docstring queries: every public function or method with a docstring of >= 4 words in its first
  sentence; the query is that sentence, the module is indexed with docstrings blanked (lines kept);
- code, identifier queries: every k-th of those functions, asked by name as a user types it
  (`HTTPResponse.getheader`, `getheader`, alternately); the definition's first chunk must rank first;
- web, API questions: every k-th Sphinx definition (`<dt id>`) of the crawled pages whose description's
  first sentence has >= 5 words; asked by that sentence (gold: the page and the definition's anchor) and
  by its name (`re.search`, `lru_cache`).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

README_QUESTION = ("where does http.client read a chunked response body?", "stdlib/http/client.py", "HTTPResponse._read_chunked")


def first_sentence(doc: str) -> str:
    text = " ".join(doc.strip().split("\n\n")[0].split())
    m = re.match(r"(.+?[.!?])(\s|$)", text)
    return (m.group(1) if m else text)[:300]


def strip_docstrings(source: str) -> tuple[str, list[dict]]:
    """(source with every docstring's lines blanked, the public functions with a docstring)."""
    tree = ast.parse(source)
    lines = source.split("\n")
    functions = []
    qualname: dict[int, str] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                outer = qualname.get(id(node))
                qualname[id(child)] = f"{outer}.{child.name}" if outer else child.name
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(getattr(body[0], "value", None), ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                doc = body[0].value.value
                start, end = body[0].lineno, body[0].end_lineno
                indent = re.match(r"\s*", lines[start - 1]).group(0)
                for i in range(start - 1, end):
                    lines[i] = ""
                lines[start - 1] = indent + "pass" if len(body) == 1 else ""
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
                    q = first_sentence(doc)
                    if len(q.split()) >= 4:
                        first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                        functions.append(
                            {
                                "name": node.name,
                                "qualname": qualname.get(id(node), node.name),
                                "start": first,
                                "def_line": node.lineno,
                                "end": node.end_lineno,
                                "query": q,
                            }
                        )
    return "\n".join(lines), functions


def code_corpus(stdlib: Path, work: Path, modules: list[str]) -> list[dict]:
    gold = []
    for rel in modules:
        text, functions = strip_docstrings((stdlib / rel).read_text(encoding="utf-8"))
        out = work / "stdlib" / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
        gold += [dict(f, file=f"stdlib/{rel}") for f in functions]
    return gold


def identifier_queries(gold: list[dict], n: int) -> list[dict]:
    """`n` functions spread over the gold list, named qualified and bare alternately (bare only when no other
    gold function has that name); names defined twice in one file (a property's setter) are left out:
    a name must point at one definition."""
    counts: dict[tuple[str, str], int] = {}
    bare: dict[str, int] = {}
    for g in gold:
        counts[(g["file"], g["qualname"])] = counts.get((g["file"], g["qualname"]), 0) + 1
        bare[g["name"]] = bare.get(g["name"], 0) + 1
    unique = [g for g in gold if counts[(g["file"], g["qualname"])] == 1]
    step = max(1, len(unique) // n)
    chosen = unique[::step][:n]
    return [dict(g, query=g["name"] if i % 2 and bare[g["name"]] == 1 else g["qualname"]) for i, g in enumerate(chosen)]


def api_definitions(html: str, page: str) -> list[dict]:
    """(anchor, name, first sentence of the description) of a Sphinx page's Python definitions."""
    import lxml.html

    root = lxml.html.fromstring(html)
    out = []
    for dt in root.xpath("//dl[contains(concat(' ', @class, ' '), ' py ')]/dt[@id]"):
        dd = dt.getnext()
        if dd is None or dd.tag != "dd":
            continue
        para = dd.find("p")
        if para is None:
            continue
        sentence = first_sentence(para.text_content())
        if len(sentence.split()) >= 5:
            out.append({"page": page, "anchor": dt.get("id"), "name": dt.get("id"), "query": sentence})
    return out


def api_questions(definitions: list[dict], n: int) -> list[dict]:
    seen, unique = set(), []
    for d in definitions:
        if d["query"] not in seen:  # a sentence shared by two entries cannot have one gold anchor
            seen.add(d["query"])
            unique.append(d)
    step = max(1, len(unique) // n)
    return unique[::step][:n]
