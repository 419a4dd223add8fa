"""A remote repository is indexed only through a clone the user makes: its URL is refused, nothing fetched."""

from ragsieve.cli.main import main


def test_repository_urls_are_refused_with_the_clone_command(tmp_path, capsys):
    for url in ("https://github.com/psf/requests.git", "git@github.com:psf/requests.git", "ssh://git@host/r.git/"):
        assert main(["index", url, "--index", str(tmp_path / "idx"), "--no-progress"]) == 2
        err = capsys.readouterr().err
        assert "clone it yourself (git clone" in err and url in err
    assert not (tmp_path / "idx").exists()  # refused before any work
