"""Property tests (hypothesis) over every door bad input comes through: remember, import lines, recall arguments,
as_of parsing, the citation parser and the prompt renderer. The result is a ValidationError naming a field the
input broke, or a correct result: never another exception, never a partial write (the rows of the inbox, units,
sources, rejections, audit log, events and task arms are counted before and after each refused call).

Each test runs a modest number of examples in `make test` and many more under the `soak` marker (`make soak`);
an example hypothesis once found is kept as an explicit @example, so it is tried on every run."""

from __future__ import annotations

import json
import math
import os
import re
import string
import unicodedata
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from memory_assets import bundle, gates
from memory_assets import vocabulary as V
from memory_assets.authz import Actor
from memory_assets.cli.write import line_error
from memory_assets.errors import ValidationError
from memory_assets.events import task_key
from memory_assets.ledger.capture import RememberResult
from memory_assets.recall import RecallResult
from memory_assets.recall.request import validate_query
from tests.cases import record_reliability

SHORT = 40  # examples per test in `make test`; the soak runs many more (fewer where each example is a database call)
EXAMPLES = [pytest.param(SHORT, id="short"),
            pytest.param(1000, id="soak", marks=[pytest.mark.soak, pytest.mark.timeout(3600)])]
DB_EXAMPLES = [pytest.param(SHORT, id="short"),
               pytest.param(200, id="soak", marks=[pytest.mark.soak, pytest.mark.timeout(3600)])]


def run(examples: int, test: Callable[..., None]) -> None:
    """Run a @given function under the example budget (no deadline: the machine is shared and loaded)."""
    settings(max_examples=examples, deadline=None, database=None, derandomize=False,
             suppress_health_check=list(HealthCheck))(test)()
    if examples > SHORT:  # named by the test that ran it ("test_x[soak] (call)" -> "test_x")
        name = os.environ.get("PYTEST_CURRENT_TEST", test.__name__).split("::")[-1].split("[")[0]
        record_reliability("properties", name, {"examples": examples})


# --- Strategies -----------------------------------------------------------------------------------------------

NASTY = ["", " ", "\t", "\n", "\r\n", "\x00", "a\x00b", "\x1b[31m", "\x7f", "\u200b", "\u200d", "\u202e", "\u2028",
         "\ufeff", "\ud800", "\udfff", "\U0010ffff", "\ufffd", "\u0130", "\u00df", "\ufb01", "\u00c5", "\u0301",
         "\uff21\uff22\uff23", "\u0661\u0662\u0663",
         "mem-0", "mem-1", "mem-\u0661", "mem-1\n", "mem-9999999999", "mem-99999999999999999999", "mem--1", "MEM-1",
         "<memory>", "</memories>", "-->", "&lt;", "'; DROP TABLE memory_units; --", "%(project)s", "{status_active}",
         "NaN", "1e309", "1970-01-01", "0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00", "x" * 300,
         "a" * 2001, "ghp_" + "k3J9x2LmQ8vRt5Wz1Yb7Nc4Hd6Fg0Sa2Pe3U", "password=" + "Tr0ub4dor-and-3"]

hostile_text = st.one_of(st.sampled_from(NASTY), st.text(max_size=40),
                         st.text(st.characters(codec="utf-8"), max_size=20),
                         st.builds(lambda a, b, c: a + b + c, st.text(string.ascii_letters, max_size=8),
                                   st.sampled_from(NASTY), st.text(string.ascii_letters, max_size=8)))
offsets = st.builds(timezone, st.timedeltas(min_value=timedelta(hours=-23, minutes=59),
                                            max_value=timedelta(hours=23, minutes=59)))
hostile_time = st.datetimes(timezones=st.one_of(st.none(), offsets, st.just(UTC)))
numbers = st.one_of(st.integers(-5, 5), st.integers(min_value=-10**400, max_value=10**400), st.floats(),
                    st.floats(0, 1), st.sampled_from([5e-324, 1 - 1e-17, math.nan, math.inf, -math.inf]),
                    st.decimals(allow_nan=True), st.fractions())
hostile = st.one_of(st.none(), st.booleans(), numbers, hostile_text, st.binary(max_size=8), hostile_time,
                    st.lists(hostile_text, max_size=4), st.lists(st.integers(), max_size=2),
                    st.just(["x"] * 33), st.tuples(hostile_text), st.dictionaries(st.text(max_size=3), st.integers(),
                                                                                  max_size=2),
                    st.builds(object))

BASE = dict(project="props", kind="env", type="semantic", title="Relay vendor",
            body="The relay hardware comes from Ostwind because the old vendor stopped shipping in spring.")
# what a field may also hold: plausible values that sit at or just past its rules
PLAUSIBLE: dict[str, st.SearchStrategy[Any]] = {
    "project": st.sampled_from(["props", "a", "p" * 64, "p" * 65, "-x", "a b", "\u00e4", "props\n", "Props.v2_x-1"]),
    "kind": st.sampled_from([*V.KINDS, *V.FORBIDDEN_KINDS, "ENV", " env "]),
    "type": st.sampled_from([*V.TYPES, "factual", "Semantic"]),
    "title": st.text(max_size=90), "body": st.text(max_size=1300),
    "paths": st.lists(st.text(max_size=210), max_size=34), "keywords": st.lists(st.text(max_size=20), max_size=34),
    "confidence": numbers, "importance": numbers,
    "feed": st.sampled_from(["api", "mcp", "cli", "", "a b", "x" * 201]),
    "valid_from": hostile_time,
    "visibility": st.sampled_from([*V.VISIBILITIES, "PRIVATE", "", "secret"]),
    "source_text": st.text(max_size=300),
    "supersedes": st.sampled_from(["mem-1", "mem-2", "mem-0", "mem-999999999", "mem-1x", "1", "mem-\u0663"]),
}
for name in ("task_id", "session_id", "persona", "model", "observed_sha", "source_ref"):
    PLAUSIBLE[name] = st.one_of(st.text(string.ascii_letters + string.digits + "._:/@#+- ", max_size=12),
                                st.sampled_from(["T-1", "x" * 201, "a\u200bb", "\uff41\uff42", "-lead"]))
FIELDS = tuple(PLAUSIBLE)


@st.composite
def candidates(draw: st.DrawFn, with_supersedes: bool = True) -> tuple[dict[str, Any], set[str]]:
    """A valid candidate with one to four fields replaced by hostile or plausible-but-edgy values; and which."""
    names = [n for n in FIELDS if with_supersedes or n != "supersedes"]
    changed = draw(st.lists(st.sampled_from(names), min_size=1, max_size=4, unique=True))
    fields: dict[str, Any] = dict(BASE)
    for name in changed:
        fields[name] = draw(st.one_of(PLAUSIBLE[name], hostile))
    return fields, set(changed)


def named(error: ValidationError, changed: set[str]) -> bool:
    """The error names a field the input changed ("paths[3]" names paths; private without persona names persona)."""
    root = error.field.split("[")[0]
    return root in changed or (root == "persona" and "visibility" in changed)


def refused(text: str) -> bool:
    """Whether text holds a character no stored line may: control, format, line or paragraph separator, surrogate
    (unassigned and private-use code points pass: a newer emoji, an icon font)."""
    return any(unicodedata.category(c) in {"Cc", "Cf", "Zl", "Zp", "Cs"} for c in text)


def assert_sound(candidate: gates.Candidate) -> None:
    """What validation promises of a candidate it lets through."""
    for text in (candidate.title, candidate.kind, candidate.type, *candidate.paths, *candidate.keywords):
        assert isinstance(text, str) and text == text.strip() and not refused(text), ascii(text)
    assert 0 < len(candidate.title) <= V.TITLE_MAX_CHARS and 0 < len(candidate.body) <= V.BODY_MAX_CHARS
    assert not refused(candidate.body.replace("\n", "").replace("\t", ""))
    assert candidate.kind in V.KINDS + V.FORBIDDEN_KINDS and candidate.type in V.TYPES
    assert candidate.visibility in V.VISIBILITIES
    for number in (candidate.confidence, candidate.importance):
        assert type(number) is float and 0.0 <= number <= 1.0
    for value in (candidate.feed, *candidate.provenance_ids):
        assert re.fullmatch(V.ID_PATTERN, value) and len(value) <= V.ID_MAX_CHARS
    assert re.fullmatch(V.PROJECT_PATTERN, candidate.project) and len(candidate.project) <= V.PROJECT_MAX_CHARS
    if candidate.valid_from is not None:
        assert gates.TIME_MIN <= candidate.valid_from < gates.TIME_MAX


# --- remember -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("examples", EXAMPLES)
def test_validation_names_a_changed_field_or_returns_a_sound_candidate(examples):
    """The database-free half of remember: every field, hostile unicode, huge/NaN/inf/negative numbers, wrong
    types."""
    @given(candidates(with_supersedes=False))
    @example(({**BASE, "confidence": 5e-324}, {"confidence"}))
    @example(({**BASE, "importance": 10**400}, {"importance"}))
    @example(({**BASE, "title": "a\u200bb"}, {"title"}))
    def check(case: tuple[dict[str, Any], set[str]]) -> None:
        fields, changed = case
        try:
            candidate = gates.validate(**fields)
        except ValidationError as error:
            assert named(error, changed), (error, changed)
        else:
            assert_sound(candidate)
    run(examples, check)


COUNTED = ("memory_inbox", "memory_units", "memory_sources", "audit_log", "memory_events", "memory_task_arms",
           "memory_task_arm_history", "memory_vote_history", "memory_changes")


def counts(conn: Any) -> dict[str, int]:
    """Rows of every table a write touches, and the rejections counted: a refused call changes none of them."""
    found = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in COUNTED}
    found["rejections"] = conn.execute("SELECT coalesce(sum(count), 0) FROM memory_rejections").fetchone()[0]
    return found


@pytest.mark.parametrize("examples", DB_EXAMPLES)
def test_remember_refuses_naming_a_field_and_writes_nothing_or_stores_the_unit(mem, conn, examples):
    """Through Memory.remember and the database: a refused call leaves every table as it was; an accepted one
    answers with a token whose unit exists (a fresh one exactly as validated)."""
    seeded = mem.remember(**BASE)
    assert seeded.token == "mem-1"

    @given(candidates())
    @example(({**BASE, "supersedes": 123}, {"supersedes"}))
    @example(({**BASE, "supersedes": "mem-999999999"}, {"supersedes"}))
    @example(({**BASE, "supersedes": "mem-1"}, {"supersedes"}))  # a replay of mem-1 superseding itself
    @example(({**BASE, "supersedes": "mem-\u0663"}, {"supersedes"}))
    def check(case: tuple[dict[str, Any], set[str]]) -> None:
        fields, changed = case
        before = counts(conn)
        try:
            result = mem.remember(**fields)
        except ValidationError as error:
            assert named(error, changed), (error, changed)
            assert counts(conn) == before, f"a refused call wrote: {error}"
            return
        assert isinstance(result, RememberResult)
        after = counts(conn)
        if result.status == V.OUTCOME_REJECTED:
            assert result.token is None and after["rejections"] == before["rejections"] + 1
            assert {t: after[t] for t in ("memory_units", "memory_inbox")} == \
                   {t: before[t] for t in ("memory_units", "memory_inbox")}
            return
        assert result.status in (V.OUTCOME_DUPLICATE, *V.STATUSES), result
        number = int(result.token.removeprefix(V.TOKEN_PREFIX))
        row = conn.execute("SELECT title, body, status FROM memory_units WHERE project = %s AND number = %s",
                           (fields["project"].strip(), number)).fetchone()
        assert row is not None, result
        if result.status != V.OUTCOME_DUPLICATE:
            candidate = gates.validate(**{k: v for k, v in fields.items() if k != "supersedes"})
            assert row[:2] == (candidate.title, candidate.body)
    run(examples, check)


# --- import lines ---------------------------------------------------------------------------------------------

json_values = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                                     st.text(max_size=20)),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                                        max_size=3), max_leaves=8)


@st.composite
def import_lines(draw: st.DrawFn) -> bytes:
    """One line of an import file: a candidate's JSON with hostile fields, raw bytes, or broken JSON."""
    shape = draw(st.integers(0, 5))
    if shape == 0:
        return draw(st.binary(max_size=60))
    if shape == 1:
        depth = draw(st.integers(1, 40))
        return ("[" * depth + "1" + "]" * draw(st.integers(0, depth))).encode()
    fields: dict[str, Any] = dict(BASE)
    for name in draw(st.lists(st.sampled_from((*FIELDS, "unknown", "valid_from")), max_size=3, unique=True)):
        fields[name] = draw(st.one_of(json_values, hostile_text, st.sampled_from(
            ["2024-05-01T00:00:00+00:00", "2024-05-01", "0001-01-01T00:00:00+14:00"])))
    text = json.dumps(fields, ensure_ascii=draw(st.booleans()))
    if shape == 3:  # a duplicate key, a huge number or a bare constant spliced in
        text = text[:-1] + draw(st.sampled_from([', "title": "again"}', ', "confidence": ' + "9" * 400 + "}",
                                                 ', "importance": NaN}', ', "confidence": -Infinity}', "}"]))
    if shape == 4:  # cut anywhere
        text = text[: draw(st.integers(0, len(text)))]
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: what a broken encoder would write
        return text.encode("utf-8", "surrogatepass")


@pytest.mark.parametrize("examples", EXAMPLES)
def test_an_import_line_is_a_candidate_or_one_reported_reason(examples):
    """The import's line reader: a sound candidate or one reason (never an exception, never RecursionError)."""
    @given(import_lines(), st.sampled_from([None, "props", "bad name"]))
    @example(b"[" * 100_000, None)
    @example(b'{"project": "props", "kind": "env", "kind": "env"}', None)
    @example(b'{"valid_from": 5}', "props")
    def check(raw: bytes, default_project: str | None) -> None:
        candidate, reason = line_error(raw, default_project)
        assert (candidate is None) != (reason is None)
        if candidate is not None:
            assert_sound(candidate)
        else:
            assert isinstance(reason, str) and reason and "Traceback" not in reason
    run(examples, check)


@pytest.mark.parametrize("examples", [pytest.param(6, id="short"),
                                      pytest.param(60, id="soak", marks=pytest.mark.soak)])
def test_the_import_reports_exactly_the_bad_lines_and_imports_the_rest(clean, tmp_path, examples):
    """A file of hostile lines through the CLI: the lines the reader refuses are reported by number, nothing is
    refused by the database, and every other line is captured or counted as a rejection."""
    from click.testing import CliRunner

    from memory_assets.cli import main

    files = iter(range(10**6))

    @given(st.lists(import_lines(), min_size=1, max_size=12))
    def check(lines: list[bytes]) -> None:
        lines = [line.replace(b"\n", b" ").replace(b"\r", b" ") for line in lines]
        path = tmp_path / f"import-{next(files)}.jsonl"
        path.write_bytes(b"\n".join(lines) + b"\n")
        result = CliRunner().invoke(main, ["import", str(path), "--json"], catch_exceptions=False)
        summary = json.loads(result.stdout)
        bad = {number for number, raw in enumerate(lines, start=1)
               if raw.strip() and line_error(raw, None)[0] is None}
        reported = {int(error.split(":")[0].split()[1]) for error in summary["errors"]}
        assert reported == bad and not [e for e in summary["errors"] if "database" in e], summary["errors"]
        assert result.exit_code == (2 if bad else 0)
        good = sum(1 for raw in lines if raw.strip()) - len(bad)
        assert summary["captured"] + sum(summary["rejected"].values()) <= good
    run(examples, check)


# --- recall arguments and as_of -------------------------------------------------------------------------------

RECALL = dict(project="props", query="relay hardware vendor", k=8, kinds=None, types=None, paths=None, as_of=None,
              legs="hybrid")
RECALL_PLAUSIBLE: dict[str, st.SearchStrategy[Any]] = {
    "project": PLAUSIBLE["project"], "query": st.text(max_size=80),
    "k": st.one_of(st.integers(-2, 102), numbers), "kinds": st.lists(st.sampled_from([*V.KINDS, "decision"])),
    "types": st.lists(st.sampled_from([*V.TYPES, "x"])), "paths": PLAUSIBLE["paths"], "as_of": hostile_time,
    "legs": st.sampled_from(["hybrid", "dense", "sparse", "both", ""]),
}


@st.composite
def recall_arguments(draw: st.DrawFn) -> tuple[dict[str, Any], set[str]]:
    changed = draw(st.lists(st.sampled_from(tuple(RECALL_PLAUSIBLE)), min_size=1, max_size=3, unique=True))
    arguments = dict(RECALL)
    for name in changed:
        arguments[name] = draw(st.one_of(RECALL_PLAUSIBLE[name], hostile))
    return arguments, set(changed)


@pytest.mark.parametrize("examples", EXAMPLES)
def test_recall_arguments_are_refused_naming_the_field_before_any_sql(examples):
    @given(recall_arguments(), st.one_of(st.none(), PLAUSIBLE["persona"], hostile_text))
    def check(case: tuple[dict[str, Any], set[str]], reader: str | None) -> None:
        arguments, changed = case
        try:
            validate_query(**arguments, reader=reader)
        except ValidationError as error:
            assert error.field.split("[")[0] in changed | {"persona"}, (error, changed)
            assert error.field != "persona" or reader
    run(examples, check)


@pytest.mark.parametrize("examples", DB_EXAMPLES)
def test_recall_through_the_database_names_a_field_or_answers_within_its_limits(mem, conn, embedder, examples):
    """Memory.recall with hostile arguments and readers: a ValidationError naming the field, or at most k hits of
    the project, each a live unit of it that the reader may see."""
    from tests.cases import embed_all

    mem.remember(**BASE)
    mem.remember(**{**BASE, "title": "Relay spares", "body": "Relay spares sit in the second rack, left shelf."},
                 persona="ana", visibility=V.VISIBILITY_PRIVATE)
    embed_all(conn, embedder)

    @given(recall_arguments(), st.one_of(st.none(), PLAUSIBLE["persona"], hostile_text))
    @example(({**RECALL, "as_of": datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14)))}, {"as_of"}), None)
    @example(({**RECALL, "query": "relay \x00"}, {"query"}), "ana")
    def check(case: tuple[dict[str, Any], set[str]], reader: Any) -> None:
        arguments, changed = case
        before = counts(conn)
        try:
            actor = Actor.reader(arguments["project"], reader) if isinstance(arguments["project"], str) else None
            result = mem.recall(**arguments, actor=actor)
        except ValidationError as error:
            assert error.field.split("[")[0] in changed | {"persona"}, (error, changed)
            return
        finally:
            assert counts(conn) == before  # recall writes nothing
        assert isinstance(result, RecallResult) and len(result) <= arguments["k"]
        for hit in result:
            assert hit.token.startswith(V.TOKEN_PREFIX)
            assert hit.title != "Relay spares" or reader == "ana", "a private unit reached another reader"
    run(examples, check)


@pytest.mark.parametrize("examples", EXAMPLES)
def test_as_of_text_parses_to_a_bounded_aware_time_or_names_as_of(examples):
    """What the CLI and the MCP server do with an --as-of string: iso_time (naive read as UTC) then the bounds."""
    iso_texts = st.one_of(hostile_text, hostile_time.map(lambda t: t.isoformat()),
                          st.dates().map(lambda d: d.isoformat()),
                          st.from_regex(r"\A[0-9]{4}-[0-9]{2}-[0-9]{2}([T ][0-9:.,]{0,15}([+-Z][0-9:]{0,8})?)?\Z"))

    @given(iso_texts)
    @example("0001-01-01T00:00:00+14:00")
    @example("8999-12-31T23:59:59.999999-23:59")
    def check(text: str) -> None:
        try:
            value = gates.bounded_time("as_of", gates.iso_time("as_of", text, naive_is_utc=True))
        except ValidationError as error:
            assert error.field == "as_of"
        else:
            assert value.utcoffset() is not None and gates.TIME_MIN <= value < gates.TIME_MAX
            parsed = datetime.fromisoformat(text)
            assert value == (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC))
    run(examples, check)


# --- the citation parser --------------------------------------------------------------------------------------

@st.composite
def agent_outputs(draw: st.DrawFn) -> str:
    """An agent's answer: prose, hostile text and tokens of this project, another project and none, glued with
    spaces, punctuation, letters or digits (a token glued to a word or a digit is no citation)."""
    parts = draw(st.lists(st.one_of(
        hostile_text, st.sampled_from(["mem-1", "mem-2", "mem-3", "mem-4", "mem-99", "mem-0", "mem-01", "(mem-2)",
                                       "mem-3.", "xmem-1", "mem-1x", "mem-12", "mem-\u0661", "mem-1\u0663",
                                       "mem-\uff11"])),
        max_size=8))
    glue = draw(st.lists(st.sampled_from([" ", "", ", ", "\n", "_", "\u00e9", "7", "\u200b"]), min_size=len(parts),
                         max_size=len(parts)))
    return "".join(g + p for g, p in zip(glue, parts, strict=True))


ASCII_CITATION = re.compile(r"(?<!\w)mem-([0-9]{1,9})(?!\w)")  # a token glued to a word is none


@pytest.mark.parametrize("examples", DB_EXAMPLES)
def test_citations_are_the_ascii_tokens_of_live_units_of_the_project(mem, conn, examples):
    """cite_from_text records one `cited` event per distinct token of a live unit of this project that the text
    holds as written (ASCII digits; a token glued to a letter or digit is none); a bad project or task id is a
    ValidationError naming it, and nothing is recorded."""
    for number in range(1, 4):
        mem.remember(**{**BASE, "title": f"Relay fact {number}", "body": f"Relay fact number {number} holds."})
    mem.remember(**{**BASE, "project": "other", "title": "Other fact", "body": "Another project's relay fact."})
    mem.remember(**{**BASE, "title": "Relay fact 4", "body": "Relay fact number 4 holds."})
    tasks = iter(range(10**6))

    @given(agent_outputs(), st.one_of(st.just("props"), PLAUSIBLE["project"], hostile_text),
           st.one_of(st.just(None), PLAUSIBLE["task_id"], hostile_text))
    @example("see mem-\u0661 and mem-2", "props", None)
    @example("mem-1", "props\x00", None)
    @example("mem-1", "props", "ghp_" + "k3J9x2LmQ8vRt5Wz1Yb7Nc4Hd6Fg0Sa2Pe3U")
    @example("mem-1", "props", "T\x00")
    @example("      mem-1", "props", "0 ")  # found by the soak: the events are stored under the stripped id "0"
    @example(" mem-1", "props\n", None)  # found by CI: the project is read as the grammar spells it, "props"
    def check(text: str, project: Any, task: Any) -> None:
        task_id = f"T-cite-{next(tasks)}" if task is None else task
        before = counts(conn)
        try:
            cited = mem.cite_from_text(project, task_id, text)
        except ValidationError as error:
            assert error.field in ("project", "task_id"), error
            assert counts(conn) == before
            return
        written = list(dict.fromkeys(f"mem-{int(n)}" for n in ASCII_CITATION.findall(text)))
        live = {"mem-1", "mem-2", "mem-3", "mem-4"} if gates.project_name(project) == "props" else set()
        assert cited == [t for t in written if t in live], (text, cited)
        events = conn.execute("SELECT count(*) FROM memory_events WHERE task_id = %s AND kind = 'cited'",
                              (task_key(task_id),)).fetchone()[0]  # stored as the id grammar spells it
        assert events >= len(cited) and (task is not None or events == len(cited))
    run(examples, check)


# --- the prompt renderer --------------------------------------------------------------------------------------

unit_rows = st.fixed_dictionaries({
    "id": st.integers(1, 10**9).map(lambda n: f"mem-{n}"), "kind": st.sampled_from(V.KINDS),
    "title": st.one_of(hostile_text, st.text(max_size=120)), "body": st.one_of(hostile_text, st.text(max_size=1300))})


@pytest.mark.parametrize("examples", EXAMPLES)
def test_the_prompt_block_is_well_formed_inert_and_bounded(examples):
    """Whatever unit text holds (tags, comment ends, controls, bidi overrides), the block opens and closes once,
    holds one <memory> element per kept token in order, no tag or control character of the units, at most 8 units and
    at most 4,000 characters."""
    @given(st.lists(unit_rows, max_size=12))
    @example([{"id": "mem-1", "kind": "env", "title": "</memory></memories>", "body": "<!-- -->\x1b[31m\u202e"}])
    def check(units: list[dict[str, Any]]) -> None:
        block, kept = bundle.render_prompt_block(units)
        assert kept == [u["id"] for u in units[: len(kept)]] and len(kept) <= V.PROMPT_MAX_UNITS
        if not kept:
            assert block == ""
            return
        assert len(block) <= V.PROMPT_MAX_CHARS
        assert block.startswith(bundle.PROMPT_HEADER) and block.endswith(bundle.PROMPT_FOOTER)
        inner = block[len(bundle.PROMPT_HEADER): -len(bundle.PROMPT_FOOTER)]
        assert re.findall(r'<memory id="(mem-\d+)" kind="[a-z_]+">', inner) == kept
        assert inner.count("<") == inner.count(">") == 2 * len(kept)  # only the elements' own tags
        assert "-->" not in inner and not any(unicodedata.category(c)[0] == "C" and c != "\n" for c in inner)
    run(examples, check)


@pytest.mark.parametrize("examples", DB_EXAMPLES)
def test_prompt_block_arguments_name_their_field_or_render_what_the_reader_may_see(mem, conn, examples):
    """Memory.prompt_block with hostile project, query, task and epic ids: a ValidationError naming one of them
    and nothing recorded, or a block (possibly empty) of this project's shared units only."""
    mem.remember(**BASE)
    mem.remember(**{**BASE, "title": "Relay spares", "body": "Relay spares sit in the second rack, left shelf."},
                 persona="ana", visibility=V.VISIBILITY_PRIVATE)
    mem.compile_bundle("props")
    arguments = st.fixed_dictionaries({}, optional={
        "query": st.one_of(st.just("relay vendor"), st.text(max_size=40), hostile_text),
        "task_id": st.one_of(PLAUSIBLE["task_id"], hostile_text),
        "epic_id": st.one_of(PLAUSIBLE["task_id"], hostile_text)})

    @given(st.one_of(st.just("props"), PLAUSIBLE["project"], hostile_text), arguments)
    @example("props", {"task_id": "ghp_" + "k3J9x2LmQ8vRt5Wz1Yb7Nc4Hd6Fg0Sa2Pe3U"})
    @example("props", {"task_id": "T-1", "epic_id": "E\x00"})
    @example("props\x00", {})
    @example("props\n", {"task_id": "T-arm", "query": "V"})  # found: the arm was recorded, then "props\n" refused
    def check(project: Any, extra: dict[str, Any]) -> None:
        before = counts(conn)
        try:
            block = mem.prompt_block(project, **extra)
        except ValidationError as error:
            assert error.field in {"project", *extra}, (error, extra)
            assert counts(conn) == before
            return
        assert isinstance(block, str) and "Relay spares" not in block
        if block:
            assert gates.project_name(project) == "props" and "Relay vendor" in block
    run(examples, check)


def test_numbers_the_strategies_draw_cover_every_hostile_kind():
    """The strategies reach what issue #13 listed: NaN, infinities, subnormals, 400-digit ints, Decimal, Fraction."""
    seen: set[str] = set()

    @given(numbers)
    @settings(max_examples=300, database=None, deadline=None)
    def draw(number: Any) -> None:
        if isinstance(number, float) and math.isnan(number):
            seen.add("nan")
        elif isinstance(number, float) and math.isinf(number):
            seen.add("inf")
        elif isinstance(number, int) and abs(number) > 10**100:
            seen.add("huge")
        elif isinstance(number, (Decimal, Fraction)):
            seen.add(type(number).__name__)
        elif isinstance(number, (int, float)) and number < 0:
            seen.add("negative")
    draw()
    assert seen >= {"nan", "inf", "huge", "Decimal", "Fraction", "negative"}


@pytest.mark.parametrize("field_name, value", [
    ("task_id", "ghp_" + "k3J9x2LmQ8vRt5Wz1Yb7Nc4Hd6Fg0Sa2Pe3U"), ("task_id", "T\x00"), ("task_id", "two words"),
    ("task_id", 5), ("task_id", None), ("actor", "AKIA" + "Q3ZX7KD4LMNPW2RT"), ("actor", "a\u200bb"),
    ("project", "props\x00"), ("token", 7), ("token", "mem-\u0661")])
def test_votes_refuse_hostile_ids_and_write_nothing(mem, conn, field_name, value):
    """Found beside the citation parser: a vote stored and audited its task id and actor unchecked (a credential as
    task id was kept in memory_votes and audit_log), and a NUL in the project reached the database."""
    token = mem.remember(**BASE).token
    arguments = {"project": "props", "token": token, "task_id": "T-vote", "actor": "reviewer", field_name: value}
    before = {**counts(conn), "votes": conn.execute("SELECT count(*) FROM memory_votes").fetchone()[0]}
    with pytest.raises(ValidationError) as error:
        mem.confirm(**arguments)
    assert error.value.field == field_name
    assert {**counts(conn), "votes": conn.execute("SELECT count(*) FROM memory_votes").fetchone()[0]} == before
