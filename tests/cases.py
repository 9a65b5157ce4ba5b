"""Cases and helpers the test modules share, in one place (test modules never import each other)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memory_assets import embeddings
from memory_assets import vocabulary as V

REPO = Path(__file__).resolve().parent.parent
SERVING_MODEL = T1 = "minilm-l6@gt0.1-t1"  # the default serving model
T2 = "minilm-l6@gt0.1-t2"  # the same weights over another text: a second model for re-embedding tests

# Candidates each exclusion rule rejects (fields over a valid default candidate).
EXCLUSION_CASES = [
    (V.REASON_DECISION_KIND, dict(kind="decision", body="We chose PostgreSQL over MySQL for the ledger storage.")),
    (V.REASON_SESSION_SUMMARY, dict(kind="recipe", type="procedural", title="Session recap",
                                    body="In this session I worked on the importer and fixed flaky tests.")),
    (V.REASON_TASK_STATE, dict(kind="env", body="This PR bumps the staging TLS settings, see PR #412 for context.")),
    (V.REASON_TASK_STATE, dict(kind="qa", title="Importer status", body="I implemented the importer retry loop.")),
    (V.REASON_LOCATOR_ONLY, dict(kind="codemap", title="Importer",
                                 body="memory_assets/cli.py import_ ledger.remember_many")),
    (V.REASON_VERBATIM_FILE_TEXT, dict(kind="recipe", type="procedural", title="Install steps",
                                       body="Run make install then make test to create the virtual environment.",
                                       source_text="# Setup\nRun make install then make test to create the virtual "
                                                   "environment.\nMore text follows here.")),
    (V.REASON_GOTCHA_WITHOUT_REPRO, dict(kind="gotcha", type="procedural", title="Importer slow",
                                         body="The importer gets slow on large files after a while.")),
]

# Fake credentials of many kinds: each (kind, text, needle), the needle being what must never be stored.
# Assembled from pieces so the repository itself holds no scannable credential.
SECRETS = [
    ("aws_access_key", "AKIA" + "Q3ZX7KD4LMNPW2RT", "Q3ZX7KD4LMNPW2RT"),
    ("private_key", "-----BEGIN RSA " + "PRIVATE KEY----- MIIEowIBAAKCAQEA7zq", "MIIEowIBAAKCAQEA7zq"),
    ("github_pat_classic", "ghp_" + "k3J9x2LmQ8vRt5Wz1Yb7Nc4Hd6Fg0Sa2Pe3U", "k3J9x2LmQ8vRt5Wz1Yb7Nc4Hd6Fg0Sa2Pe3U"),
    ("github_pat_fine", "github_pat_" + "11ABCDE2F0q9W8e7R6t5Y4u3I2o1P0", "11ABCDE2F0q9W8e7R6t5Y4u3I2o1P0"),
    ("gitlab", "glpat-" + "x9Yz8Wv7Ut6Sr5Qp4On3", "x9Yz8Wv7Ut6Sr5Qp4On3"),
    ("slack", "xoxb-" + "2849371652-9384756102-QwErTyUiOp", "9384756102-QwErTyUiOp"),
    ("openai", "sk-" + "proj-T7fK2pQ9mW4xZ8vB3nC6jH1L", "T7fK2pQ9mW4xZ8vB3nC6jH1L"),
    ("anthropic", "sk-ant-" + "api03-Zq8Xw7Vu6Ts5Rq4Po3Nm2", "api03-Zq8Xw7Vu6Ts5Rq4Po3Nm2"),
    ("jwt", "eyJhbGciOiJIUzI1NiJ9" + ".eyJzdWIiOiIxMjM0NTYifQ.c2lnbmF0dXJlX3Rlc3Q", "c2lnbmF0dXJlX3Rlc3Q"),
    ("bearer", "Authorization: Bearer " + "a8F3kL9qW2eR7tY5uI1oP4sD6", "a8F3kL9qW2eR7tY5uI1oP4sD6"),
    ("password_assignment", "password=" + "Tr0ub4dor-and-3", "Tr0ub4dor-and-3"),
    ("credential_url", "https://deploy:" + "Hx7pQ2mN9@git.internal/repo.git", "Hx7pQ2mN9"),
    ("postgres_dsn", "postgresql://app:" + "Wq4eR8tY2@db.internal:5432/app", "Wq4eR8tY2"),
    ("ado_connection_string", "Server=db;User Id=sa;Password=" + "Zx9Cv8Bn7;", "Zx9Cv8Bn7"),
    ("stripe", "sk_live_" + "51HqW8eR7tY6uI5oP4aS3dF2", "51HqW8eR7tY6uI5oP4aS3dF2"),
    ("google_api", "AIza" + "SyD4f8G2h6J0k3L7z1X5c9V2b6N0m4Q8w2E", "SyD4f8G2h6J0k3L7z1X5c9V2b6N0m4Q8w2E"),
    ("quoted_api_key", 'api_key = "' + '9f86d081884c7d659a2feaa0c55ad015"', "9f86d081884c7d659a2feaa0c55ad015"),
]


def embed_all(conn: Any, embedder: embeddings.Embedder) -> None:
    """Embed every stale unit with the test embedder (what the unit_embeddings asset does per day)."""
    embeddings.embed_units(conn, embedder, embeddings.stale_units(conn, embedder.spec.key, limit=10_000))
