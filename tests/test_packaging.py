"""The wheel ships the prompts and both import packages; the console script is declared."""
import subprocess
import sys
import zipfile

import pytest


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    from conftest import REPO

    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                    "-w", str(out), str(REPO)], check=True, capture_output=True, timeout=300)
    wheels = list(out.glob("ragsieve-*.whl"))
    assert len(wheels) == 1
    return wheels[0]


def test_wheel_contains_packages_and_every_prompt(wheel):
    from conftest import REPO

    names = set(zipfile.ZipFile(wheel).namelist())
    for template in (REPO / "prompts").glob("*.j2"):
        assert f"prompts/{template.name}" in names
    assert "agent/cli.py" in names and "tools/retriever.py" in names and "agent/steps/answer.py" in names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "ragsieve = agent.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_prompts_resolve_from_an_installed_wheel(wheel, tmp_path):
    """Unpacked outside the repo, the renderer finds the packaged templates."""
    zipfile.ZipFile(wheel).extractall(tmp_path)
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from agent.prompts import PromptRenderer; "
            "r = PromptRenderer(); import prompts; print(prompts.__file__); print(' '.join(r.names()))")
    result = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True,
                            cwd=tmp_path, timeout=120, check=True)
    assert str(tmp_path) in result.stdout.splitlines()[0]
    assert "answer" in result.stdout.splitlines()[1].split()
