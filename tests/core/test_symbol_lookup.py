"""When a name in the query is a lookup, and how spelled-out definitions are raised (pure functions)."""

from ragsieve.tools.index.query.definitions import SPELLED_BOOST, definitions_first
from ragsieve.tools.index.search.symbols import Definition, SymbolTable, is_lookup, key, named_identifiers


def test_short_questions_about_a_name_are_lookups_and_descriptions_that_mention_one_are_not():
    for query in (
        "re.search",
        "What does functools.lru_cache do?",
        "how does wait_for cancel the task on timeout",
        "HTTPResponse._read_chunked",
        "`dictConfig`",
    ):
        assert is_lookup(query), query
    for query in (
        "Return a ZipInfo object with information about the archive member name.",
        "A subclass of HTTPConnection that uses SSL for communication with secure servers.",
    ):
        assert not is_lookup(query), query


def test_rest_double_backticks_give_names_and_dunders_keep_their_underscores():
    assert named_identifiers("Serialize ``obj`` to a JSON formatted ``str``.") == ["obj", "str"]
    assert named_identifiers("use `re.search()` here") == ["re.search"]
    assert key("__str__") == "__str__" and key("_read_chunked") == "read_chunked"
    table = SymbolTable()
    table.add(Definition("Cookie.__str__", "method", 4))
    table.add(Definition("str_to_bytes", "function", 7))
    assert table.lookup("`str`") == []  # a builtin's name is not the dunder's


def test_named_rows_lead_and_a_spelled_row_gains_a_share_of_the_top_score():
    fused = [(1, 1.0), (2, 0.9), (3, 0.8), (4, 0.55)]
    assert [r for r, _ in definitions_first(fused, [4])] == [4, 1, 2, 3]
    raised = definitions_first(fused, [], [3])  # 0.8 + 0.3 > 1.0: first, on its own evidence plus the boost
    assert [r for r, _ in raised] == [3, 1, 2, 4] and abs(raised[0][1] - (0.8 + SPELLED_BOOST)) < 1e-9
    assert [r for r, _ in definitions_first(fused, [], [4])] == [1, 2, 4, 3]  # 0.55 + 0.3 passes 0.8, not 0.9
    scores = [s for _, s in definitions_first(fused, [2], [4])]
    assert scores == sorted(scores, reverse=True)
