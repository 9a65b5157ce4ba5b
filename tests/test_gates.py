"""The exclusion policy and the secret gate, as pure functions."""

import json
import re
import string
import time
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_assets import gates
from memory_assets import vocabulary as V
from memory_assets.errors import ValidationError
from tests.cases import EXCLUSION_CASES, REPO, SECRET_BASE, SECRET_CORPUS, SECRETS, full_width


def candidate(**overrides):
    fields = dict(project="acme", kind="env", type="semantic", title="Staging needs TLS",
                  body="Staging PostgreSQL requires sslmode=require because the proxy refuses plain TCP.")
    fields.update(overrides)
    return gates.validate(**fields)




@pytest.mark.parametrize("reason,overrides", EXCLUSION_CASES,
                         ids=[c[0] + str(i) for i, c in enumerate(EXCLUSION_CASES)])
def test_each_exclusion_reason_fires(reason, overrides):
    assert gates.gate(candidate(**overrides)) == reason


_PHRASE_PIECES = [
    "in this session", "This Session, we", "SESSION SUMMARY", "summary of today's session", "today we looked",
    "I worked on", "what we did today", "we spent the session", "PR #12", "mr 7", "pull request 3", "merge request#4",
    "/pull/9", "/merge_requests/5", "this branch", "this pr", "I have fixed", "i just merged", "ticket 8", "TASK#1",
    "issue 22", "todo", "WIP", "wip:", "\u0130 fixed", "\u0131 fixed", "\u017fe\u017f\u017fion \u017fummary",
    "\u212aeep", "T\u0130CKET 4", " ", "\n", "#", "_", "1", "session", "summary", "this", "I", "fixed", "x",
]


# The two rules as single regexes before their phrases were split out: the verdict each must keep
SESSION_SUMMARY = re.compile(
    r"\b(in this session|this session,? (i|we)|session summary|summary of (the|this|today'?s) session|"
    r"today (i|we) (worked|did|fixed|implemented|looked)|(i|we) worked on|what (i|we) did( today)?|"
    r"(i|we) spent (the|this) session)\b",
    re.IGNORECASE,
)
TASK_STATE = re.compile(
    r"(\b(PR|MR|pull request|merge request)\s*#?\d+\b|/pull/\d+|/merge_requests/\d+|"
    r"\bthis (PR|MR|pull request|branch)\b|"
    r"\bI (have |just )?(implemented|fixed|added|changed|refactored|updated|opened|merged)\b|"
    r"\b(ticket|task|issue)\s*#?\d+\b|\bTODO\b|\bWIP\b)",
    re.IGNORECASE,
)


@given(st.lists(st.one_of(st.sampled_from(_PHRASE_PIECES), st.text(alphabet=string.ascii_letters + string.digits
                                                                   + " #/_'\n", max_size=24)), min_size=1, max_size=8))
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_an_exclusion_rule_fires_exactly_where_the_alternation_of_its_phrases_matches(pieces):
    """Each phrase is searched for only where its screen lets it match: the verdict must be the rule's single regex's,
    on glued and case-folded spellings (the long s and the dotted I match s and i ignoring case)."""
    text = "".join(pieces)
    assert gates._SESSION_SUMMARY(text) == bool(SESSION_SUMMARY.search(text))
    assert gates._TASK_STATE(text) == bool(TASK_STATE.search(text))


@pytest.mark.parametrize("text", ["In this \u017fe\u017f\u017fion I fixed it", "T\u0130CKET 4 holds it",
                                  "we \u017fpent the session", "the plan is \u0131n th\u0131s session"])
def test_a_phrase_spelled_with_letters_the_engine_folds_still_fires(text):
    """A screen reads the case-folded text, so a phrase the regex engine matches ignoring case is never skipped."""
    assert SESSION_SUMMARY.search(text) or TASK_STATE.search(text)
    assert gates._SESSION_SUMMARY(text) or gates._TASK_STATE(text)


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


def test_a_candidates_keys_are_worked_out_once_and_never_outlive_its_text(monkeypatch):
    """The writer reads a candidate's content hash and idempotency key several times: hashed once; a copy with
    other text (dataclasses.replace, how the source text is dropped) has its own, and a pickled one (the gate
    processes) keeps the same."""
    import dataclasses
    import pickle

    hashed = []
    real = gates.content_hash
    monkeypatch.setattr(gates, "content_hash", lambda *parts: hashed.append(parts) or real(*parts))
    first = candidate(source_text="the session it came from")
    keys = {first.idempotency_key, first.idempotency_key}
    assert first.content_hash == real("env", first.title, first.body) and len(hashed) == 1 and len(keys) == 1
    other = dataclasses.replace(first, title="Staging needs mTLS")
    assert other.content_hash != first.content_hash and other.idempotency_key != first.idempotency_key
    assert pickle.loads(pickle.dumps(first)).idempotency_key == first.idempotency_key
    stored = gates.without_source_text(first)
    assert stored.source_text is None and stored.idempotency_key == first.idempotency_key
    assert gates.without_source_text(stored) is stored  # nothing to drop: no copy


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


# --- Issue #13: the secret gate under hostile input -------------------------------------------------------------

CLEAN_TEXTS = [
    "Staging PostgreSQL requires sslmode=require because the proxy refuses plain TCP.",
    "Commit 3f2a9c1e5b7d4e8f9a0b1c2d3e4f5a6b7c8d9e0f fixed the importer because the fold dropped rows.",
    "Session 3f2a9c1e-5b7d-4e8f-9a0b-1c2d3e4f5a6b crashed at midnight when the pool was exhausted.",
    "Image digest sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 is pinned.",
    "XmlHttpRequest2FactoryBeanV3Impl and getUserById2ForTheAdminPanel3 live in src/main/java/com/acme/Api2Impl.",
    "Set MAX_CONNECTIONS=200 and POSTGRES_VERSION=16-bookworm in the env file.",
    "The password must have 12 characters; set api_key in settings.toml, never in code.",
    "Caroline: I went to the support group yesterday and it was so powerful!",
    "Caf\u00e9 \u2026 \u00e9t\u00e9: \u0436\u0443\u0440\u043d\u0430\u043b"
    " \u0440\u0435\u043b\u0438\u0437\u043e\u0432 (the release log) is kept in Russian.",
]


def unvalidated(**fields):
    """A candidate built without validation, so the gate alone is tested on what validation would refuse."""
    fields = {**SECRET_BASE, **fields}
    for name in ("paths", "keywords"):
        fields[name] = tuple(fields.get(name, ()))
    return gates.Candidate(**fields)


@pytest.mark.parametrize("name,fields,needle", SECRET_CORPUS, ids=[c[0] for c in SECRET_CORPUS])
def test_the_secret_gate_catches_every_corpus_variant(name, fields, needle):
    """Normalised (NFKC, invisible characters removed, look-alikes folded), over each field and their
    concatenation, ids included; a credential as a project name is refused by validation."""
    assert len(SECRET_CORPUS) >= 50
    if "project" in fields:
        with pytest.raises(ValidationError, match="project: looks like a credential") as error:
            gates.validate(**{**SECRET_BASE, **fields})
        assert needle not in str(error.value)
        return
    assert gates.gate(unvalidated(**fields)) == V.REASON_SECRET
    try:
        candidate = gates.validate(**{**SECRET_BASE, **fields})
    except ValidationError as error:  # refused before the gate: a format character, a credential as the feed
        assert needle not in str(error)
    else:
        assert gates.gate(candidate) == V.REASON_SECRET


@pytest.mark.parametrize("text", CLEAN_TEXTS)
def test_ordinary_text_shas_uuids_and_identifiers_are_no_secret(text):
    assert gates.secret_kinds(text) == []
    assert gates.gate(candidate(body=text, observed_sha="3f2a9c1e5b7d4e8f9a0b1c2d3e4f5a6b7c8d9e0f",
                                session_id="3f2a9c1e-5b7d-4e8f-9a0b-1c2d3e4f5a6b", task_id="PROJ-123",
                                persona="Caroline", source_ref="D1:3", model="claude-3.5-sonnet")) is None


def test_the_readme_and_demo_examples_pass_the_gate():
    readme = (REPO / "README.md").read_text()
    assert not [p for p in readme.split("\n\n") if gates.has_secret(p)]
    demo = [json.loads(line) for line in (REPO / "memory_assets/demo/demo_units.jsonl").read_text().splitlines()]
    flagged = {d["task_id"] for d in demo if gates.gate(gates.validate(**d)) == V.REASON_SECRET}
    assert flagged == {"DEMO-15"}  # the demo's one deliberate credential


def test_scan_form_folds_width_invisibles_and_look_alikes():
    assert gates.scan_form(full_width("AKIA") + "\u200b\u2060X") == "AKIAX"
    assert gates.scan_form("\u0410\u041a\u0406\u0410 \u0440\u0430ss") == "AKIA pass"  # Cyrillic look-alikes
    assert gates.scan_form("line one\nline\u00adtwo") == "line one\nlinetwo"


# Unicode's Default_Ignorable_Code_Point (DerivedCoreProperties.txt): drawn as nothing wherever they stand
DEFAULT_IGNORABLE = [(0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160), (0x17B4, 0x17B5),
                     (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x3164, 0x3164),
                     (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3),
                     (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF)]


def test_scan_form_drops_every_default_ignorable_code_point():
    """Regression: the unassigned ones (U+2065, U+FFF0-FFF8, the tag block's gaps) were kept, so a credential with
    one between each of its characters read as no credential and was stored."""
    kept = [hex(point) for low, high in DEFAULT_IGNORABLE for point in range(low, high + 1)
            if gates.scan_form(f"a{chr(point)}b") != "ab"]
    assert kept == []
    assert gates.scan_form("A\U000e0080K\ue000I\u2065A") == "AKIA"


def test_scan_form_reads_every_single_ascii_look_alike_unicode_lists_as_ascii():
    """Regression: a hand-made table left out Cherokee D, G, R and L, Cyrillic izhitsa, Greek digamma and more, and an
    AWS key or a PEM header spelled with them passed. Each character Unicode's confusables give one ASCII letter or
    digit now reads as one, a capital I as I and a digit as a digit."""
    from confusable_homoglyphs.confusables import confusables_data

    unread = [character for character, entries in confusables_data.items()
              if len(character) == 1 and not character.isascii()
              and len({e["c"] for e in entries if e["c"].isascii() and e["c"].isalnum()}) == 1
              and not (gates.scan_form(character).isascii() and gates.scan_form(character).isalnum())]
    assert unread == []
    assert gates.scan_form("\u13a0\u13c0\u13a1\u13de \u0474\u03dc\u053c") == "DGRL VFL"
    assert gates.scan_form("\u0406\u0399 \u06f1\u09e6 \u03f2\u03f9") == "II 10 cC"  # capitals, digits, lunate sigmas


@pytest.mark.parametrize("field", ["task_id", "session_id", "source_ref", "persona", "model", "observed_sha",
                                   "feed"])
@pytest.mark.parametrize("value", ["has space", "tab\there", "nul\x00", "zero\u200bwidth", "caf\u00e9",
                                   "\u0410KIA", "-leading-dash", "semi;colon", "x" * 201])
def test_ids_follow_the_identifier_grammar(field, value):
    with pytest.raises(ValidationError) as error:
        candidate(**{field: value})
    assert error.value.field == field
    assert value not in str(error.value)


def test_ids_in_the_grammar_pass():
    c = candidate(task_id="gh:acme/repo#12", session_id="3f2a9c1e-5b7d-4e8f-9a0b-1c2d3e4f5a6b", persona="ana@acme",
                  source_ref="D1:3", model="claude-3.5-sonnet", observed_sha="3f2a9c1e5b7d", feed="mcp")
    assert gates.gate(c) is None


@pytest.mark.parametrize("field,value", [
    ("title", "bell \x07 title"), ("title", "two\nlines"), ("title", "tab\tinside"), ("title", "zero\u200bwidth"),
    ("title", "line\u2028separator"), ("body", "escape \x1b[31m red"), ("body", "nul-ish \x7f delete"),
    ("body", "joiner \u2060 inside"), ("body", "bom \ufeff inside"), ("body", "bidi \u202e override"),
    ("paths", ["src/\x00x.py"]), ("paths", ["src/\u200bx.py"]), ("keywords", ["t\x1fls"]),
    ("keywords", ["soft\u00adhyphen"]), ("project", "acme\u200b"),
])
def test_control_and_format_characters_are_refused_naming_the_field(field, value):
    with pytest.raises(ValidationError) as error:
        candidate(**{field: value})
    assert error.value.field.split("[")[0] == field


def test_bodies_keep_line_breaks_and_tabs_and_normalise_line_endings():
    c = candidate(body="First line\r\n\tindented second line\rthird line because of CR")
    assert c.body == "First line\n\tindented second line\nthird line because of CR"


@pytest.mark.parametrize("field", ["confidence", "importance"])
@pytest.mark.parametrize("value", [10**400, -(10**400), float("nan"), float("inf"), float("-inf"), True, "0.5",
                                   None, [0.5], 1 + 1e-9])
def test_numbers_are_range_checked_before_conversion(field, value):
    with pytest.raises(ValidationError) as error:
        candidate(**{field: value})
    assert error.value.field == field


def test_a_number_below_the_smallest_real_is_stored_as_zero():
    assert candidate(confidence=5e-324).confidence == 0.0
    assert candidate(importance=1e-45).importance == 1e-45  # a REAL subnormal: stored as it is
    assert candidate(confidence=1).confidence == 1.0


@pytest.mark.parametrize("value", [
    datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14))),
    datetime(9999, 12, 31, 23, 59, tzinfo=timezone(timedelta(hours=-14))),
    datetime(1969, 12, 31, 23, 59, tzinfo=UTC),
    datetime(9000, 1, 1, tzinfo=UTC),
])
def test_valid_from_is_bounded(value):
    with pytest.raises(ValidationError, match="valid_from: must lie between 1970-01-01 and 9000-01-01"):
        candidate(valid_from=value)


def test_valid_from_inside_the_bounds_passes():
    assert candidate(valid_from=datetime(1970, 1, 1, tzinfo=UTC)).valid_from.year == 1970
    assert candidate(valid_from=datetime(8999, 12, 31, tzinfo=timezone(timedelta(hours=14)))).valid_from


def test_a_secret_is_never_quoted_back_in_an_error():
    token = "ghp_" + "k3J9x2LmQ8vRt5Wz1Yb7Nc4Hd6Fg0Sa2Pe3U"
    for field in ("kind", "type", "visibility"):
        with pytest.raises(ValidationError) as error:
            candidate(**{field: token})
        assert token[4:] not in str(error.value)
    with pytest.raises(ValidationError) as error:
        gates.iso_time("as_of", token)
    assert token[4:] not in str(error.value)


@pytest.mark.parametrize("run", ["a_", "pwd=", "a_key=", "sk-aT3BlbkFJ", "'pwd\"", "key-", "://a:"])
def test_the_secret_gate_stays_linear_on_the_largest_candidate_of_a_repeated_run(run):
    """Regression (an attacker's pass): a name's run of "a_" made one pattern backtrack through every "_" (4 s for
    a 14 kB candidate within every limit, the GIL held throughout, and again at every run of the blocking check)."""
    filled = [(f"p{i:02d}" + run * 200)[: V.ITEM_MAX_CHARS] for i in range(V.KEYWORDS_MAX)]
    hostile = candidate(title="key x://y token password secret aws", body=(run * V.BODY_MAX_CHARS)[: V.BODY_MAX_CHARS],
                        paths=filled[: V.PATHS_MAX], keywords=filled)
    started = time.perf_counter()
    gates.gate(hostile)
    assert time.perf_counter() - started < 1.0  # 2-4 s before; ~0.1 s now


def test_an_error_never_quotes_back_a_value_too_long_to_read():
    """click quotes a refused value whole: a 100 kB one was scanned whole (minutes) and echoed back."""
    message = gates.redacted("Invalid value for '--confidence': '" + "key " + "a_" * 50_000 + "' is not a number.")
    assert message == "Invalid value for '--confidence': (a value of 100004 characters, not shown) is not a number."
    assert gates.redacted("Invalid value for '--k': 'ten'") == "Invalid value for '--k': 'ten'"


def test_the_verbatim_gate_is_linear_and_its_input_capped():
    """An adversarial source (the one difflib needed 102 s for) gates in far under the bound, at the cap too."""
    body = ("ab" * 600)[: V.BODY_MAX_CHARS]
    started = time.perf_counter()
    for source in ("ab" * 10_000, "a b " * 5_000, ("ab" * 500 + "x") * 20, "ba" * (V.SOURCE_TEXT_MAX_CHARS // 2)):
        gates.exclusion_reason(candidate(kind="recipe", type="procedural", body=body, source_text=source))
    assert time.perf_counter() - started < 5
    with pytest.raises(ValidationError, match="source_text: at most"):
        candidate(source_text="x" * (V.SOURCE_TEXT_MAX_CHARS + 1))


def test_a_source_text_is_normalised_only_as_far_as_the_gate_reads_it():
    """Regression (an attacker's pass): a million U+FDFA (3 MB, within the limit) normalise to 18 M characters, which
    took the verbatim gate 5 s and 330 MB. A source is normalised a piece at a time, never a word split, up to the
    limit; any other source exactly as normalise() gives it."""
    ordinary = " ".join(f"Word{i}\t{'é' * (i % 3)}\n" for i in range(40_000))
    assert gates.normalised_start(ordinary, V.SOURCE_TEXT_MAX_CHARS) == gates.normalise(ordinary)
    assert len(gates.normalised_start("\ufdfa" * V.SOURCE_TEXT_MAX_CHARS, 1000)) == 1000
    started = time.perf_counter()
    gates.exclusion_reason(candidate(kind="recipe", type="procedural", body="Deploy with care " * 10,
                                     source_text="\ufdfa" * V.SOURCE_TEXT_MAX_CHARS))
    assert time.perf_counter() - started < 2  # 5 s before


def test_the_verbatim_share_counts_copied_runs():
    source = "# Setup\nRun make install then make test to create the virtual environment.\nMore text."
    assert gates.verbatim_share("Run make install then make test to create the virtual environment.", source) == 1.0
    assert gates.verbatim_share("Releases are cut on Thursday mornings; late merges wait.", source) == 0.0
    half = gates.verbatim_share("Run make install then make test. Releases are cut on Thursday mornings.", source)
    assert 0.3 < half < 0.7


def test_a_contribution_without_a_task_is_keyed_by_who_contributed_it():
    base = dict(project="acme", kind="note", type="semantic", title="Relay", body="The relay comes from Ostwind.")
    ana = gates.validate(**base, persona="ana", visibility="private")
    assert ana.idempotency_key == gates.validate(**base, persona="ana", visibility="private").idempotency_key
    others = [gates.validate(**base, persona="bo"), gates.validate(**base, persona="ana"),
              gates.validate(**base, persona="ana", visibility="private", session_id="S-2"),
              gates.validate(**base, persona="ana", visibility="private", feed="mcp")]
    assert len({ana.idempotency_key, *(o.idempotency_key for o in others)}) == 5
    # with a task, the task is the contribution: a replay by anyone adds nothing
    assert (gates.validate(**base, task_id="T-1", persona="ana").idempotency_key
            == gates.validate(**base, task_id="T-1", persona="bo").idempotency_key)


# --- has_secret's screens agree with running every detector unscreened (the gate got faster, not weaker) --------

def _corpus_texts():
    for _, fields, _ in SECRET_CORPUS:
        yield gates.candidate_text(unvalidated(**fields))
    yield from (text for _, text, _ in SECRETS)
    yield from CLEAN_TEXTS
    yield from (REPO / "README.md").read_text().split("\n\n")


def test_has_secret_agrees_with_every_detector_on_the_corpus_and_the_readme():
    """Every screen only skips a detector where it cannot fire: the verdict equals secret_kinds' on every text
    (a reversed substring test once passed the corpus test but not this one)."""
    disagreements = [text[:40] for text in _corpus_texts() if gates.has_secret(text) != bool(gates.secret_kinds(text))]
    assert disagreements == []


_LITERAL_SETS = (gates._hints().cased, gates._hints().folded, ("sk-", "sk-ant-", "s"), ("", "x"), ())


@given(st.sampled_from(_LITERAL_SETS),
       st.lists(st.one_of(st.sampled_from([lit for lits in _LITERAL_SETS for lit in lits if lit]),
                          st.text(alphabet="sk-antKIA.eyJ/:_ä", max_size=6)), max_size=6).map("".join))
def test_a_literal_screen_finds_a_text_exactly_where_one_of_its_literals_occurs(literals, text):
    """The screens' one search for any of a set of literals (nested by shared prefix) is an `in` test of each."""
    assert bool(gates._any_literal(literals)(text)) == any(literal in text for literal in literals)


def test_every_plugin_screen_passes_each_line_its_plugin_fires_on():
    """A screen of one of detect-secrets' own plugins (keyword, entropy, JWT) skips it only on a line it cannot fire
    on: each plugin, run alone over every line has_secret hands it, fires only where its screen passes (the verdict
    test alone misses a wrong screen wherever another detector fires on the same secret)."""
    screened = [(plugin, screen) for plugin, screen in gates._screened_plugins()[1] if screen is not None]
    assert {type(plugin).__name__ for plugin, _ in screened} >= {"KeywordDetector", "JwtTokenDetector",
                                                                  "Base64HighEntropyString"}
    fired: set[str] = set()
    for text in _corpus_texts():
        lines = gates.scan_form(text)
        for line in {*gates._chunks(lines), lines.replace("\n", "")}:
            for plugin, screen in screened:
                if plugin.analyze_line(filename="memory-unit", line=line, line_number=0):
                    fired.add(type(plugin).__name__)
                    assert screen(line), (type(plugin).__name__, line[:60])
    assert fired == {type(plugin).__name__ for plugin, _ in screened}  # each screen is tried where it must pass


def _stripped(text: str) -> str:
    return gates._WHITESPACE.sub("", gates.scan_form(text))  # the form the hints are read in (gates._detections)


def test_every_match_of_a_hinted_pattern_holds_one_of_its_literals_with_the_whitespace_removed():
    """A hint is what lets has_secret skip its detector: every match of the pattern, on any form of a text that
    fires it (a secret split over lines and fields included), holds one of the hint's literals in the text with its
    whitespace removed, case-folded where the pattern ignores case."""
    hints = gates._hints()
    patterns = [*gates._EXTRA.values(), *(gates._plugin_pattern(s) for _, s, _ in gates._screened_plugins()[0])]
    hinted = [(pattern, hint) for pattern in patterns if (hint := gates._hint(pattern)) is not None]
    assert len(hinted) > len(patterns) // 2 and hints.cased and hints.folded  # the hints do skip most detectors
    texts = [*_corpus_texts(), *(text[:i] + "\n" + text[i:] for _, text, _ in SECRETS for i in range(1, len(text)))]
    fired = 0
    for text in texts:
        lines = gates.scan_form(text)
        stripped = _stripped(text)
        forms = {lines, lines.replace("\n", ""), stripped, *gates._chunks(lines)}
        for pattern, hint in hinted:
            if any(pattern.search(form) for form in forms):
                fired += 1
                held = gates.case_folded(stripped) if hint.folded else stripped
                assert any(needle in held for needle in hint.needles), (pattern.pattern, text)
    assert fired > len(texts)  # the corpus fires the hinted patterns, so the assertion above is tried


@pytest.mark.parametrize("pattern", [r"x(?mi:abcd)", r"[0-9](?si:abcd)", r"x(?i:abcd)", r"(?x) x (?i: a b c d )",
                                     r"(?:qqq|x(?ai:abcd))"])
def test_a_group_that_ignores_case_gives_its_pattern_a_folded_screen_and_hint(pattern):
    """A pattern that heeds case but for one group ((?mi:…) as much as (?i:…)) matches other cases of that group's
    literals: its screen and its hint read the case-folded text (the second attacker's review: no pattern of ours or
    of detect-secrets has such a group today, an upgrade could add one)."""
    compiled = re.compile(pattern)
    text = "1" + next(m for m in ("xABCD", "1ABCD") if compiled.search(m))
    hint, screen = gates._hint(compiled), gates._screen(compiled)
    assert compiled.search(text) and hint is not None and hint.folded
    assert any(needle in gates.case_folded(_stripped(text)) for needle in hint.needles)
    assert screen is None or screen(text)


@pytest.mark.parametrize(("text", "absent"), [
    ("The staging service needs 4 GiB because its working set grows with the batch.", True),
    ("The deploy job reads its token from the vault.", False),  # a keyword's literal: every detector runs
    ("Relay at https://relay.internal:8443 serves the build cache.", False),
])
def test_a_text_without_any_hinted_literal_skips_the_hinted_detectors_and_only_then(text, absent):
    """A clean text without any hinted literal takes the short path (so the hint tests above are not vacuous), one
    holding a keyword or a URL's '://' runs every detector; both pass."""
    assert gates._hints().absent(_stripped(text)) is absent
    assert gates.has_secret(text) is bool(gates.secret_kinds(text)) is False


def test_a_secret_split_by_whitespace_at_any_point_is_judged_as_every_detector_judges_it():
    """The hints read the text with its whitespace removed: a secret cut by a line break, a space or a tab at any
    point gets the verdict of every detector run unscreened."""
    cut = [(name, text[:i] + gap + text[i:])
           for name, text, _ in SECRETS for i in range(1, len(text)) for gap in "\n \t"]
    assert [(name, text) for name, text in cut if gates.has_secret(text) != bool(gates.secret_kinds(text))] == []


def test_the_case_folded_text_holds_a_letter_exactly_where_the_regex_engine_matches_it_ignoring_case():
    """The case-insensitive screens look for literals in case_folded(text): any character that the engine matches
    to an ASCII letter ignoring case must fold to that letter, one character to one (U+0130 lowers to two)."""
    every_character = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000)
    folded = gates.case_folded(every_character)
    assert len(folded) == len(every_character)
    for letter in string.ascii_lowercase:
        matched = {m.start() for m in re.finditer(letter, every_character, re.IGNORECASE)}
        assert matched == {i for i, c in enumerate(folded) if c == letter}, letter


@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=64))
@settings(max_examples=300, deadline=None)
def test_an_ascii_text_is_case_folded_as_its_translation_through_the_fold_would_be(text):
    """An ASCII text skips the fold's translation, none of its characters being in the table: the same text."""
    assert gates.case_folded(text) == text.translate(gates._CASE_FOLD or {}).lower()


@pytest.mark.parametrize("text", ["PR\u0130VATE-KEY: Zq8hunter2hunter2", "db_pa\u017f\u017fword: Zq8hunter2hunter2",
                                  "BEARER abcdefghijklmnop1234", "Client_Secret=Zq8hunter2hunter2"])
def test_a_case_insensitive_screen_passes_every_spelling_of_its_keyword(text):
    """A screen reads the folded text: "prİvate" is "private" to the engine ignoring case, not to str.lower."""
    assert gates.secret_kinds(text) and gates.has_secret(text)


_PIECES = [needle for _, _, needle in SECRET_CORPUS] + [text for _, text, _ in SECRETS] + [
    "password", "api_key", "client_secret", "=", ":", ": '", '="', "'", '"', "`", ";", "-us12", "://", "@", "AKC",
    "AP1", "sk-", "k_live_", "MII", "eyJ", ".", "Bearer ", "aws", "cloudant_key", "ibm_cloud_iam_key", "softlayer",
    "sl_api_key", "12345678:", "xoxb-", "hooks.slack.com/services/T", "AccountKey=", "SG.", "-----BEGIN ",
    "PRIVATE KEY", "\n", " ", "\t", "\u200b", "\uff41", "\u0410", "pr\u0130vate_key=", "\u0130", "\u0131",
    "\u017f", "\u212a", "BEARER ", "PASSWORD: ",
]


@given(st.lists(st.one_of(st.sampled_from(_PIECES), st.text(alphabet=string.ascii_letters + string.digits + "_-+/=",
                                                            min_size=1, max_size=48)), min_size=1, max_size=8))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_has_secret_agrees_with_every_detector_on_glued_fragments(pieces):
    text = "".join(pieces)
    assert gates.has_secret(text) == bool(gates.secret_kinds(text))
