"""`ragsieve search`, `ragsieve remove`, `index --sync/--include/--exclude` through the real CLI."""
import json
import shutil
from pathlib import Path

from ragsieve.agent.cli.main import main

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_search_prints_ranked_citations_with_symbols_and_no_model(examples_index, capsys):
    code = main(["search", "retry with exponential backoff after a rate limit", "--index", str(examples_index),
                 "--top-k", "5", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and len(data["hits"]) == 5
    assert [h["rank"] for h in data["hits"]] == [1, 2, 3, 4, 5]
    scores = [h["score"] for h in data["hits"]]
    assert scores == sorted(scores, reverse=True)
    code_hits = [h for h in data["hits"] if h["citation"].startswith("examples/code/")]
    assert code_hits, data["hits"]
    assert all(h["citation"].split(":", 1)[1][0].isdigit() for h in code_hits)
    assert any(h["citation"].endswith(")") for h in code_hits)  # path:start-end (Class.method)
    assert main(["search", "webhook signature", "--index", str(examples_index), "--top-k", "2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("  1. examples/") and "score" in out
    assert main(["search", "x", "--index", str(examples_index), "--top-k", "0"]) == 2
    assert main(["search", "  ", "--index", str(examples_index)]) == 2


def test_index_sync_remove_and_globs(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    docs = tmp_path / "docs"
    shutil.copytree(EXAMPLES / "docs", docs)
    index = str(tmp_path / "index")
    assert main(["index", str(docs), "--index", index, "--exclude", "*.html", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "2 excluded" in out and "excluded by --exclude '*.html'" in out and "5 added" in out
    (docs / "webhooks.md").unlink()
    assert main(["index", str(docs), "--index", index, "--include", "*.md", "--no-progress"]) == 0
    assert "0 removed" in capsys.readouterr().out
    assert main(["index", str(docs), "--index", index, "--include", "*.md", "--sync", "--no-progress"]) == 0
    assert "1 removed" in capsys.readouterr().out
    assert main(["remove", "docs/api-keys.md", "--index", index]) == 0
    assert "1 removed" in capsys.readouterr().out
    assert main(["search", "rotate api key", "--index", index, "--json"]) == 0
    cited = {h["citation"].split(":")[0] for h in json.loads(capsys.readouterr().out)["hits"]}
    assert "docs/api-keys.md" not in cited and "docs/webhooks.md" not in cited and cited
    assert main(["remove", "nothing/", "--index", index]) == 2
    assert "nothing in index" in capsys.readouterr().err
    assert main(["remove", "x", "--index", str(tmp_path / "missing")]) == 2
    capsys.readouterr()
    assert main(["index", "https://github.com/psf/requests.git", "--index", index]) == 2
    assert "clone it first" in capsys.readouterr().err


def test_index_a_website_url_then_search_cites_url_anchor(tmp_path, capsys):
    from site_server import serve_folder

    site = tmp_path / "site"
    shutil.copytree(Path(__file__).parent / "fixtures" / "site", site)
    index = str(tmp_path / "index")
    with serve_folder(site) as base:
        assert main(["index", base + "index.html", "--index", index, "--rate", "50/s", "--max-pages", "10",
                     "--chunk-tokens", "40", "--no-progress"]) == 0
        out = capsys.readouterr().out
        assert "4 new or changed pages" in out and "disallowed by robots.txt" in out and "4 added" in out
        assert main(["index", base + "index.html", "--index", index, "--rate", "50/s", "--no-progress",
                     "--chunk-tokens", "48"]) == 0  # new chunk size: every page fetched again and re-chunked
        assert "4 new or changed pages" in capsys.readouterr().out
        assert main(["index", base + "index.html", "--index", index, "--rate", "50/s", "--no-progress",
                     "--chunk-tokens", "48"]) == 0
        assert "4 unchanged, 0 gone" in capsys.readouterr().out
        assert main(["index", base + "index.html", "--index", index, "--rate", "fast"]) == 2
        assert "invalid --rate" in capsys.readouterr().err
    assert main(["search", "How long do clients wait after 429 Too Many Requests?", "--index", index, "--json"]) == 0
    top = json.loads(capsys.readouterr().out)["hits"][0]
    assert top["citation"] == base + "guide.html#retry-policy"
