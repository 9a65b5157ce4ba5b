"""The exclusion policy and the secret gate, as pure functions."""

import pytest

from memory_assets import gates
from memory_assets import vocabulary as V
from memory_assets.errors import ValidationError
from tests.cases import EXCLUSION_CASES


def candidate(**overrides):
    fields = dict(project="acme", kind="env", type="semantic", title="Staging needs TLS",
                  body="Staging PostgreSQL requires sslmode=require because the proxy refuses plain TCP.")
    fields.update(overrides)
    return gates.validate(**fields)




@pytest.mark.parametrize("reason,overrides", EXCLUSION_CASES,
                         ids=[c[0] + str(i) for i, c in enumerate(EXCLUSION_CASES)])
def test_each_exclusion_reason_fires(reason, overrides):
    assert gates.gate(candidate(**overrides)) == reason


def test_canon_duplicate_uses_token_jaccard():
    canon_text = "Staging PostgreSQL requires sslmode=require because the proxy refuses plain TCP connections."
    canon = [gates.token_hashes(canon_text)]
    assert gates.gate(candidate(), canon) == V.REASON_CANON_DUPLICATE
    other = candidate(title="Release train", body="Releases are cut on Thursday mornings; late merges wait a week.")
    assert gates.gate(other, canon) is None


def test_clean_candidates_pass_every_gate():
    assert gates.gate(candidate()) is None
    assert gates.gate(candidate(kind="gotcha", type="procedural", title="Flaky import",
                                body="Import hangs when the file has CRLF endings.\n"
                                     "Repro: memory-assets import crlf.jsonl")) is None
    assert gates.gate(candidate(kind="codemap", title="Write path",
                                body="memory_assets/ledger.py owns the write path "
                                     "because every writer must dedupe.")) is None
    # conversation notes are not held to engineering hygiene rules
    assert gates.gate(candidate(kind="note", type="episodic", title="Caroline: running",
                                body="Caroline: I implemented a new running plan this week!")) is None


def test_content_hash_ignores_case_and_spacing():
    assert gates.content_hash("env", "A  Title", "Body text") == gates.content_hash("env", "a title", " body   TEXT ")
    assert gates.content_hash("env", "a", "b") != gates.content_hash("qa", "a", "b")


@pytest.mark.parametrize("field,value,limit", [
    ("title", "x" * 81, "at most 80"),
    ("body", "y" * 1201, "at most 1200"),
    ("kind", "opinion", "must be one of"),
    ("type", "factual", "must be one of"),
    ("confidence", 1.5, "between 0 and 1"),
    ("importance", -0.1, "between 0 and 1"),
    ("body", "   ", "must not be empty"),
    ("title", "bad \udcff utf8", "valid UTF-8"),
    ("paths", "not-a-list", "list of strings"),
    ("project", "has space", "letters, digits"),
])
def test_validation_names_field_and_limit(field, value, limit):
    with pytest.raises(ValidationError) as error:
        candidate(**{field: value})
    assert error.value.field == field
    assert str(error.value).startswith(f"{field}:") and limit in str(error.value)


def test_visibility_is_project_or_private_and_private_needs_a_persona():
    base = dict(project="acme", kind="note", type="semantic", title="Relay", body="The relay comes from Ostwind.")
    assert gates.validate(**base).visibility == V.DEFAULT_VISIBILITY
    assert gates.validate(**base, visibility="private", persona="ana").visibility == "private"
    with pytest.raises(ValidationError, match="visibility: must be one of project, private"):
        gates.validate(**base, visibility="secret")
    with pytest.raises(ValidationError, match="persona: required when visibility is private"):
        gates.validate(**base, visibility="private")


def test_iso_time_names_the_field_and_reads_naive_times_as_utc_when_asked():
    assert gates.iso_time("as_of", "2026-01-02T03:04", naive_is_utc=True).tzinfo is not None
    assert gates.iso_time("valid_from", "2026-01-02T03:04").tzinfo is None  # remember refuses naive times later
    with pytest.raises(ValidationError, match="valid_from: must be an ISO 8601 time"):
        gates.iso_time("valid_from", "May 3rd")
