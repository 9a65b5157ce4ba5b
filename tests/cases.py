"""Cases and helpers the test modules share, in one place (test modules never import each other)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

from memory_assets import database, embeddings, gates
from memory_assets import vocabulary as V

REPO = Path(__file__).resolve().parent.parent
SERVING_MODEL = T1 = "minilm-l6@gt0.1-t1"  # the default serving model
MIGRATION_RECORDS = "('schema_migrations', 'schema_functions')"  # migrate()'s own tables: no memory, no row policy
# whether recall reads a unit's sources (sql/024's column as the unit was born, sql/025's marks since), in SQL
READS_ITS_SOURCES = "(sources_beyond_origin OR id IN (SELECT unit_id FROM memory_units_beyond_origin))"
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


def without_model_index(conn: Any, spec: embeddings.ModelSpec) -> None:
    """The model's HNSW indexes dropped (they outlive each test's truncation), as in a store that never embedded with
    it."""
    for name in embeddings.model_indexes(conn, embeddings.model_index_prefix(spec), valid=None):
        conn.execute(f"DROP INDEX {name}")
    conn.commit()


def indexes_at_each_write(monkeypatch: Any, spec: embeddings.ModelSpec, fail_first: bool = False) -> list[list[str]]:
    """Record the model's indexes, valid or not (writes go into both), standing when each batch of vectors is written
    (failing the first, if asked)."""
    seen: list[list[str]] = []
    write_vectors = embeddings.write_vectors
    prefix = embeddings.model_index_prefix(spec)

    def recording(own: Any, *args: Any) -> int:
        seen.append(embeddings.model_indexes(own, prefix, valid=None))
        if fail_first and len(seen) == 1:
            raise psycopg.OperationalError("the server went away mid-run")
        return write_vectors(own, *args)

    monkeypatch.setattr(embeddings, "write_vectors", recording)
    return seen


def units_counted(conn: Any) -> float:
    """The rows of memory_units its last ANALYZE or VACUUM counted (-1: never), what the planner plans recall on."""
    counted: float = conn.execute("SELECT reltuples FROM pg_class WHERE oid = 'memory_units'::regclass").fetchone()[0]
    return counted


def units_analysed(conn: Any) -> int:
    """How many times an ANALYZE has run on memory_units (autovacuum's own runs counted apart)."""
    count: int = conn.execute("SELECT analyze_count FROM pg_stat_user_tables WHERE relname = 'memory_units'"
                              ).fetchone()[0]
    return count


def full_text_merged(conn: Any) -> int:
    """How many pages of the full-text index's pending entries this merged (0: none were pending), leaving none."""
    pages: int = conn.execute("SELECT gin_clean_pending_list('memory_units_entries')").fetchone()[0]
    return pages


def service_facts(n: int, offset: int = 0) -> list[Any]:
    """n distinct valid candidates for one project, to grow memory_units by a known number of rows."""
    return [gates.validate(project="acme", kind="env", type="semantic", title=f"Service {i} port",
                     body=f"Service number {i} listens on port {10000 + i} behind the staging proxy.")
            for i in range(offset, offset + n)]


# --- The secret corpus (issue #13) ----------------------------------------------------------------------------
# Variants an attacker or a careless agent produces, each (name, fields, needle): the fields override
# SECRET_BASE (a clean candidate), the needle is what must never be stored or logged. Assembled from pieces (and
# invisible or look-alike characters added at run time) so the repository holds no scannable credential.
SECRET_BASE = dict(project="acme", kind="env", type="semantic", title="Deploy credential",
                   body="The deploy step needs this value on the staging host.")
_GH_TAIL = "k3J9x2LmQ8vRt5Wz1Yb7Nc4Hd6Fg0Sa2Pe3U"
_GH = "ghp_" + _GH_TAIL
_AWS_TAIL = "Q3ZX7KD4LMNPW2RT"
_B64_LINES = ["MIIEvQIBADANBgkqhkiG9w0BAQEFAASC" + "BKcwggSjAgEAAoIBAQC7k2Xw9pLq4VzR",
              "tY8uN3mB6cJ1oQ5sD0fH2gK7jE4iA9lW" + "xZ3vP6rT8yU1nM5bC2qS7dF0gH4kJ9eL",
              "aO6wR3tY8uI1pA5sD2fG7hJ0kL4zX9cV" + "bN3mQ6wE8rT1yU5iO2pA7sD0fG4hJ9kQ"]
# drawn as nothing though not format characters: unassigned default-ignorables (U+2065, U+FFF0, the tag block's gaps)
# and private use
_UNASSIGNED = {"unassigned_2065": "\u2065", "unassigned_fff0": "\ufff0", "unassigned_tag_gap": "\U000e0080",
               "private_use": "\ue000"}
_ZW = {"zwsp": "\u200b", "zwnj": "\u200c", "zwj": "\u200d", "word_joiner": "\u2060", "bom": "\ufeff",
       "soft_hyphen": "\u00ad", "hangul_filler": "\u3164", "combining_acute": "\u0301"}


def full_width(text: str) -> str:
    """ASCII letters, digits and punctuation as their full-width forms (NFKC folds them back)."""
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


def _with(body: str) -> dict[str, Any]:
    return {"body": f"Deploy with {body} on the staging host."}


SECRET_CORPUS: list[tuple[str, dict[str, Any], str]] = [
    ("google_key_then_dash", _with("AIza" + "SyD4f8G2h6J0k3L7z1X5c9V2b6N0m4Q8w" + "--prod"),
     "SyD4f8G2h6J0k3L7z1X5c9V2b6N0m4Q8w"),
    *[(f"ghp_{name}", _with(_GH[:14] + char + _GH[14:]), _GH_TAIL[10:]) for name, char in _ZW.items()],
    *[(f"aws_{name}_between_every_character", _with(char.join("AKIA" + _AWS_TAIL)), char.join(_AWS_TAIL[4:]))
      for name, char in _UNASSIGNED.items()],
    ("ghp_full_width", _with(full_width(_GH)), full_width(_GH_TAIL[10:])),
    ("ghp_half_full_width", _with(_GH[:14] + full_width(_GH[14:])), full_width(_GH_TAIL[10:])),
    ("ghp_thin_space", _with(_GH[:14] + "\u2009" + _GH[14:]), _GH_TAIL[10:]),
    ("ghp_spaced", _with(" ".join(_GH[i:i + 8] for i in range(0, len(_GH), 8))), _GH_TAIL[12:20]),
    ("password_zwsp", _with("pass\u200bword=" + "Hx8-corral-" + "Staple9"), "Hx8-corral-Staple9"),
    ("password_full_width", _with(full_width("password=") + "Qv4-lantern-" + "Moss2"), "Qv4-lantern-Moss2"),
    ("aws_cyrillic_prefix", _with("AKI\u0410" + _AWS_TAIL), _AWS_TAIL),
    ("aws_cyrillic_inside", _with("AKIA" + "Q3ZX7\u041aD4LMNPW2RT"), "D4LMNPW2RT"),
    ("aws_greek_inside", _with("AKIA" + "Q3ZX7KD4LMN\u03a1W2RT"), "Q3ZX7KD4LMN"),
    ("aws_cherokee_look_alikes", _with("AKIA" + "2R\u13c0L\u13a07QWERTYUPZX"), "7QWERTYUPZX"),
    ("aws_armenian_liwn", _with("AKIA" + "Q3ZX7KD4\u053cMNPW2RT"), "MNPW2RT"),
    ("private_key_cherokee_g", _with("-----BE\u13c0IN RSA " + "PRIVATE KEY----- MIIEowIBAAKCAQEA8zq"),
     "MIIEowIBAAKCAQEA8zq"),
    ("aws_cyrillic_izhitsa", _with("AKIA" + "Q3ZX7KD4\u0474MNPW2RT"), "MNPW2RT"),
    ("aws_math_bold", _with("\U0001d400\U0001d40a\U0001d408\U0001d400" + "W9ZX7KD4LMNPW2RT"), "W9ZX7KD4LMNPW2RT"),
    ("anthropic_greek_alpha", _with("sk-" + "\u03b1nt-api03-" + "Zq8Xw7Vu6Ts5Rq4Po3Nm2Lk"), "Zq8Xw7Vu6Ts5Rq4Po3Nm2Lk"),
    ("openai_cyrillic_o", _with("sk-pr" + "\u043ej-" + "T7fK2pQ9mW4xZ8vB3nC6jH1LaPq"), "T7fK2pQ9mW4xZ8vB3nC6jH1LaPq"),
    ("split_title_body_aws",
     {"title": "Deploy key AKIA" + "R8TY", "body": "2WQ6PLMZ4NXV" + " opens the staging bucket."}, "2WQ6PLMZ4NXV"),
    ("split_title_body_ghp", {"title": "Deploy token " + _GH[:12], "body": _GH[12:] + " opens the registry."},
     _GH[12:]),
    ("split_keywords", {"keywords": ["deploy", _GH[:16], _GH[16:]]}, _GH[16:]),
    ("split_lines", {"body": "The staging token is " + _GH[:20] + "\n" + _GH[20:] + "\nUse it for deploys."},
     _GH[20:]),
    ("npm_bare", _with("npm_" + "a1B2c3D4e5F6g7H8i9J0" + "k1L2m3N4o5P6q7R8"), "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"),
    ("heroku_uuid", _with("HEROKU_API_KEY=" + "3f2a9c1e-5b7d-4e8f-" + "9a0b-1c2d3e4f5a6b"),
     "3f2a9c1e-5b7d-4e8f-9a0b-1c2d3e4f5a6b"),
    ("aws_secret_without_keyword", _with("Zq8/Xw7Vu6Ts5Rq4Po3N" + "m2Lk1Jh0Gf9+Ed8Cb7Aa"),
     "Zq8/Xw7Vu6Ts5Rq4Po3Nm2Lk1Jh0Gf9+Ed8Cb7Aa"),
    ("pem_body_without_header", {"body": "Key material for staging:\n" + "\n".join(_B64_LINES)}, _B64_LINES[1][:24]),
    ("pem_line_without_der_prefix", _with(_B64_LINES[2]), _B64_LINES[2][8:40]),
    ("unquoted_base64_blob", _with("dGhpc2lzYXNlY3Jl" + "dGJsb2JmMG9yVGgzNHBp"),
     "dGhpc2lzYXNlY3JldGJsb2JmMG9yVGgzNHBp"),
    ("unquoted_base64url_blob", _with("q9X_2mZ-8vLw4Rt" + "Y6uP0aS3dF5gH7jK1"), "q9X_2mZ-8vLw4RtY6uP0aS3dF5gH7jK1"),
    ("task_id_token", {"task_id": _GH}, _GH_TAIL[10:]),
    ("session_id_token", {"session_id": "AKIA" + "V5ZX7KD4LMNPW2RT"}, "V5ZX7KD4LMNPW2RT"),
    ("source_ref_token", {"source_ref": "npm_" + "Z1B2c3D4e5F6g7H8i9J0" + "k1L2m3N4o5P6q7R8"},
     "Z1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"),
    ("persona_token", {"persona": "glpat-" + "x9Yz8Wv7Ut6Sr5Qp4On3"}, "x9Yz8Wv7Ut6Sr5Qp4On3"),
    ("model_token", {"model": "sk-ant-" + "api03-Kq8Xw7Vu6Ts5Rq4Po3Nm2"}, "api03-Kq8Xw7Vu6Ts5Rq4Po3Nm2"),
    ("observed_sha_token", {"observed_sha": "AIza" + "SyK4f8G2h6J0k3L7z1X5c9V2b6N0m4Q8w2E"},
     "SyK4f8G2h6J0k3L7z1X5c9V2b6N0m4Q8w2E"),
    ("feed_token", {"feed": "xoxb-" + "2849371652-9384756102-ZwErTyUiOp"}, "9384756102-ZwErTyUiOp"),
    ("project_token", {"project": "ghp_" + "P3J9x2LmQ8vRt5Wz1Yb7Nc4Hd6Fg0Sa2Pe3U"},
     "P3J9x2LmQ8vRt5Wz1Yb7Nc4Hd6Fg0Sa2Pe3U"),
    ("path_token", {"paths": ["config/" + "glpat-" + "m9Yz8Wv7Ut6Sr5Qp4On3"]}, "m9Yz8Wv7Ut6Sr5Qp4On3"),
    ("keyword_token", {"keywords": ["deploy", "xoxp-" + "1849371652-7384756102-QwErTyUiOq"]}, "7384756102-QwErTyUiOq"),
    ("title_token", {"title": "Token " + "sk_live_" + "61HqW8eR7tY6uI5oP4aS3dF2"}, "61HqW8eR7tY6uI5oP4aS3dF2"),
    ("jwt_zwsp", _with("eyJhbGciOiJIUzI1NiJ9" + ".\u200beyJzdWIiOiI5ODc2NTQifQ.c2lnbmF0dXJl" + "X290aGVy"),
     "c2lnbmF0dXJlX290aGVy"),
    ("bearer_word_joiner", _with("Authorization: Bear\u2060er " + "b9F3kL9qW2eR7tY5uI1oP4sX6"),
     "b9F3kL9qW2eR7tY5uI1oP4sX6"),
    ("huggingface", _with("hf_" + "aBcDeFgHiJkLmNoPqRsTuVwXyZ12345678"), "aBcDeFgHiJkLmNoPqRsTuVwXyZ12345678"),
    ("shopify", _with("shpat_" + "0f1e2d3c4b5a69788796a5b4c3d2e1f0"), "0f1e2d3c4b5a69788796a5b4c3d2e1f0"),
    ("stripe_test", _with("sk_test_" + "51HqW8eR7tY6uI5oP4aS3dG7"), "51HqW8eR7tY6uI5oP4aS3dG7"),
    ("slack_webhook", _with("https://hooks.slack.com/services/" + "T0A1B2C3D/B4E5F6G7H/" + "p9O8i7U6y5T4r3E2w1Q0aZxC"),
     "p9O8i7U6y5T4r3E2w1Q0aZxC"),
    ("sendgrid", _with("SG." + "aB3dE5gH7jK9mN1pQ3sT5v" + "." + "wX7zA9cE1gI3kM5oQ7sU9wY1aC3eG5iK7mO9qS1uW3y"),
     "wX7zA9cE1gI3kM5oQ7sU9wY1aC3eG5iK7mO9qS1uW3y"),
    ("twilio", _with("SK" + "0f1e2d3c4b5a6978" + "8796a5b4c3d2e1f0"), "0f1e2d3c4b5a69788796a5b4c3d2e1f0"),
    ("telegram", _with("bot 5678901234:" + "AAHq9Xw7Vu6Ts5Rq4Po3Nm2Lk1Jh0Gf9Ed"), "AAHq9Xw7Vu6Ts5Rq4Po3Nm2Lk1Jh0Gf9Ed"),
    ("pypi", _with("pypi-" + "AgEIcHlwaS5vcmcCJGE4ZjNkMmE1LWI3YzAtNGQ5ZS1hMTIzLTQ1NjdkOGU5ZjAxMgACKlsz"),
     "LWI3YzAtNGQ5ZS1hMTIzLTQ1NjdkOGU5ZjAxMgACKlsz"),
    ("azure_storage", _with("DefaultEndpointsProtocol=https;AccountName=acme;AccountKey="
                            + "k3J9x2LmQ8vRt5Wz1Yb7Nc4Hd6Fg0Sa2Pe3U"
                            + "q9X2mZ8vLw4RtY6uP0aS3dF5gH7jK1nB4cV6xZ8aQ1wE3rT5y==;"),
     "Pe3Uq9X2mZ8vLw4RtY6uP0aS3dF5gH7jK1nB4cV6xZ8aQ1wE3rT5y"),
    ("mailchimp", _with("mailchimp " + "0f1e2d3c4b5a69788796a5b4c3d2e1f0" + "-us12"),
     "0f1e2d3c4b5a69788796a5b4c3d2e1f0-us12"),
    ("aws_secret_export", _with('export AWS_SECRET_ACCESS_KEY="' + "Yq8/Xw7Vu6Ts5Rq4Po3N" + 'm2Lk1Jh0Gf9+Ed8Cb7Ab"'),
     "Yq8/Xw7Vu6Ts5Rq4Po3Nm2Lk1Jh0Gf9+Ed8Cb7Ab"),
    ("client_secret_yaml", _with("client_secret: " + "Gx5-walrus-" + "Tundra81"), "Gx5-walrus-Tundra81"),
    ("mysql_dsn", _with("mysql://root:" + "Vb7nM3qL9" + "@db.internal:3306/app"), "Vb7nM3qL9"),
    ("digitalocean", _with("dop_v1_" + "0f1e2d3c4b5a69788796a5b4c3d2e1f0" * 2), "0f1e2d3c4b5a69788796a5b4c3d2e1f0"),
    ("pem_header_nbsp", {"body": "-----BEGIN\u00a0RSA\u00a0PRIVATE" + " KEY-----\n" + _B64_LINES[1]},
     _B64_LINES[1][:24]),
    ("age_secret_key", _with("AGE-SECRET-KEY-" + "1QQ9X8W7V6U5T4S3R2Q1P0N9M8L7K6J5H4G3F2E1D0C9B8A7Z6Y5X4W3V2U"),
     "9X8W7V6U5T4S3R2Q1P0N9M8L7K6J5H4G3F2E1D0C9B8A7Z6Y5X4W3V2U"),
    ("databricks", _with("dapi" + "0f1e2d3c4b5a6978" + "8796a5b4c3d2e1f0"), "dapi0f1e2d3c4b5a6978"),
    # formats an attacker's pass found passing, as a body or a project name (a Dagster partition key)
    ("mailgun", _with("mailgun " + "key-" + "3ax6xnjp29jd6fds4gc373sgvjxteol0"), "3ax6xnjp29jd6fds4gc373sgvjxteol0"),
    ("project_mailgun", {"project": "key-" + "3bx6xnjp29jd6fds4gc373sgvjxteol1"}, "3bx6xnjp29jd6fds4gc373sgvjxteol1"),
    ("project_pulumi", {"project": "pul-" + "0f1e2d3c4b5a69788796a5b4c3d2e1f0a1b2c3d4"},
     "0f1e2d3c4b5a69788796a5b4c3d2e1f0a1b2c3d4"),
    ("supabase", _with("sbp_" + "1f1e2d3c4b5a69788796a5b4c3d2e1f0a1b2c3d4"),
     "1f1e2d3c4b5a69788796a5b4c3d2e1f0a1b2c3d4"),
    ("rubygems", _with("rubygems_" + "2f1e2d3c4b5a69788796a5b4c3d2e1f0a1b2c3d4e5f6a7b8"),
     "2f1e2d3c4b5a69788796a5b4c3d2e1f0a1b2c3d4e5f6a7b8"),
    ("postman", _with("PMAK-" + "3f1e2d3c4b5a69788796a5b4" + "-" + "c3d2e1f0a1b2c3d4e5f6a7b8c9d0e1f2a3"),
     "c3d2e1f0a1b2c3d4e5f6a7b8c9d0e1f2a3"),
    ("new_relic", _with("NRAK-" + "Q1W2E3R4T5Y6U7I8O9P0A1S2D3F"), "Q1W2E3R4T5Y6U7I8O9P0A1S2D3F"),
    ("dynatrace", _with("dt0c01." + "Q1W2E3R4T5Y6U7I8O9P0A1S2" + "." + "D3F4G5H6J7K8L9Z0" * 4), "D3F4G5H6J7K8L9Z0"),
    ("terraform_cloud", _with("q1w2e3r4t5y6u7" + ".atlasv1." + "z9x8c7v6b5n4m3" * 5), "z9x8c7v6b5n4m3"),
    ("figma", _with("figd_" + "Zx9Cv8Bn7Mq6Wr5Ty4Ui3Op2As1Df0Gh9Jk8Lz7X"), "Zx9Cv8Bn7Mq6Wr5Ty4Ui3Op2As1Df0Gh9Jk8Lz7X"),
    ("clickup", _with("pk_" + "12345678" + "_" + "Q1W2E3R4T5Y6U7I8O9P0A1S2D3F4G5H6"),
     "Q1W2E3R4T5Y6U7I8O9P0A1S2D3F4G5H6"),
    ("asana", _with("1/" + "1203456789012345" + ":" + "5f1e2d3c4b5a69788796a5b4c3d2e1f0"),
     "5f1e2d3c4b5a69788796a5b4c3d2e1f0"),
    ("db_password_env", _with("DB_PASSWORD=" + "Nq3-harbor-" + "Lamp5"), "Nq3-harbor-Lamp5"),
    ("api_key_yaml_quoted", _with("api_key: '" + "Rt5-Wz1Yb7-" + "Nc4Hd6'"), "Rt5-Wz1Yb7-Nc4Hd6"),
]


# --- The reliability results (issue #13) -----------------------------------------------------------------------
RELIABILITY_RESULTS = REPO / "bench" / "results" / "reliability.json"


def record_reliability(section: str, name: str, figures: dict[str, Any]) -> None:
    """Add one soak's figures to a section (faults, load, properties, secret_corpus) of the one results file
    `make soak` writes; other sections and entries stay as the last soak left them."""
    RELIABILITY_RESULTS.parent.mkdir(parents=True, exist_ok=True)
    data = json.loads(RELIABILITY_RESULTS.read_text()) if RELIABILITY_RESULTS.exists() else {}
    data.setdefault(section, {})[name] = {**figures, "at": datetime.now(UTC).isoformat(timespec="seconds")}
    RELIABILITY_RESULTS.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


FLIGHTS = [(f"Flight {i} to Berlin delayed", f"Flight #{i} to Berlin for the offsite was delayed by fog.")
           for i in range(6)]


def flights(mem):
    """Six episodes of one event, in project acme: one weekly consolidation cluster."""
    return [mem.remember(project="acme", kind="note", type="episodic", title=title, body=body, task_id=f"T-{i}")
            for i, (title, body) in enumerate(FLIGHTS)]


def rerun_migrations_from(conn: Any, name: str) -> None:
    """Run a migration again, as on a store upgraded from before it, then every later one and every function file, so
    the store is left as the code expects it (a later definition replaced by the earlier one's copy would be lost)."""
    files = database.migration_files()
    for file in [*files[[f.name for f in files].index(name):], *database.function_files()]:
        conn.execute(file.read_text())


def function_in_migration(name: str, migration: str) -> str:
    """A server function's definition as a numbered migration copied it: an earlier release's, to put back."""
    text = (database.sql_dir() / migration).read_text()
    found = re.search(rf"CREATE OR REPLACE FUNCTION {name}\(.*?\$\$;", text, re.S)
    assert found, (name, migration)
    return found.group(0)


def backdate(conn: Any, columns: tuple[tuple[str, str], ...], by: str) -> None:
    """Move (table, column) timestamps back by an interval, as if the rows had been written that much earlier."""
    for table, column in columns:
        conn.execute(f"UPDATE {table} SET {column} = {column} - %s::interval", (by,))


def until_waiting_on_a_lock(conninfo: str, backends: int = 1, timeout: float = 10.0,
                            transaction: str | None = None) -> None:
    """Return once that many of the database's backends wait for a lock (another test's thread stopped where the
    test means it to), or with `transaction` (its pg_current_xact_id) for that transaction to end, or fail after
    `timeout` seconds: a race test must not pass because its racer came late."""
    import time

    deadline = time.monotonic() + timeout
    waiting = ("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
               if transaction is None else "SELECT count(*) FROM pg_locks WHERE locktype = 'transactionid' "
               "AND NOT granted AND transactionid::text = %s")
    with psycopg.connect(conninfo, autocommit=True) as watcher:
        while watcher.execute(waiting, None if transaction is None else (transaction,)).fetchone()[0] < backends:
            assert time.monotonic() < deadline, f"fewer than {backends} backends ever waited for a lock"
            time.sleep(0.02)
