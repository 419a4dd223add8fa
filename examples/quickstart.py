"""Index the Lumen example docs and ask one question, using ragsieve's Python API.

Run from the repository root after `make demo` (which builds the .ragsieve-demo index):

    .venv/bin/python examples/quickstart.py
"""

from ragsieve import Config, Orchestrator

QUESTION = "How do I rotate the API key of a Lumen workspace, and what happens to the old key?"


def main() -> None:
    orch = Orchestrator.open(".ragsieve-demo", Config())
    try:
        answer = orch.ask(QUESTION)
        print(answer.answer)
        print()
        for c in answer.citations:
            print(f"[{c.number}] {c.label()}")
    finally:
        orch.close()


if __name__ == "__main__":
    main()
