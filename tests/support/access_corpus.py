"""A corpus with a "needle": a document only `group:finance` may read, and the strings that must not leak."""

from __future__ import annotations

from pathlib import Path

NEEDLE_TEXT = "The Heron acquisition closes on 14 March at a price of 41 million euros, paid in three parts."
NEEDLE_WORDS = ("41 million", "14 March", "needle-budget", "Acquisition plan")  # text, path, title (not the question's words)
QUESTION = "When does the Heron acquisition close and at what price?"
RULES = "# the finance folder, wherever it lies\nfinance/   group:finance\n"

DOCS = {
    "finance/needle-budget.md": f"# Acquisition plan\n\n{NEEDLE_TEXT}\n",
    "handbook/holidays.md": "# Holidays\n\nStaff take 25 days of paid holiday a year; request them in the HR portal.\n",
    "handbook/laptops.md": "# Laptops\n\nNew laptops are ordered through the IT desk and arrive within five days.\n",
    "handbook/acquisitions.md": "# Acquisitions policy\n\nEvery acquisition is announced to staff by the board "
    "after it closes; prices are not shared before then.\n",
    "notes/alice.md": "---\ntitle: Alice's notes\naccess: user:alice@example.com\n---\n\n"
    "Alice keeps her parking space number, 17B, in these notes.\n",
}


def write_corpus(root: Path) -> Path:
    """The corpus under `root/corpus` and its rules file `root/access.rules`; returns the corpus folder."""
    corpus = root / "corpus"
    for rel, text in DOCS.items():
        path = corpus / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    (root / "access.rules").write_text(RULES, encoding="utf-8")
    return corpus


def leaks(text: str) -> list[str]:
    """The needle's strings found in `text` (what another user must never receive)."""
    return [w for w in NEEDLE_WORDS if w.lower() in text.lower()]


def build_needle_index(root: Path, embedder) -> Path:
    """The needle corpus indexed under `root/index`, labelled by its rules file and front matter."""
    from ragsieve.tools.access.labels import set_rules
    from ragsieve.tools.access.rules import AccessRules
    from ragsieve.tools.index.building.builder import IndexBuilder

    corpus = write_corpus(root)
    folder = root / "index"
    set_rules(folder, AccessRules.read(root / "access.rules"), str(root / "access.rules"))
    IndexBuilder(folder, embedder=embedder, progress=False).build([str(corpus)])
    return folder


def make_jwks(folder: Path, kid: str = "k1"):
    """An RSA signing key and its JWKS file `folder/jwks.json`; returns (private key, JWKS path)."""
    import json

    from cryptography.hazmat.primitives.asymmetric import rsa
    from jwt.algorithms import RSAAlgorithm

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(RSAAlgorithm.to_jwk(key.public_key()))
    path = folder / "jwks.json"
    path.write_text(json.dumps({"keys": [jwk | {"kid": kid, "use": "sig", "alg": "RS256"}]}), encoding="utf-8")
    return key, path


def token(
    key,
    *,
    user: str,
    groups: list[str],
    exp_in_s: float = 300,
    kid: str = "k1",
    issuer: str = "https://idp.test",
    audience: str = "ragsieve",
) -> str:
    import time

    import jwt

    now = int(time.time())
    return jwt.encode(
        {"iss": issuer, "aud": audience, "email": user, "groups": groups, "iat": now, "exp": now + int(exp_in_s)},
        key,
        algorithm="RS256",
        headers={"kid": kid},
    )
