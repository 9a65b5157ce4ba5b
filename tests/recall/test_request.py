"""The request: query terms, validation and the context a request reads first."""

from datetime import UTC, datetime, timedelta, timezone

import pytest
from psycopg import sql

from memory_assets import authz, embeddings
from memory_assets import vocabulary as V
from memory_assets.errors import ValidationError
from memory_assets.recall import legs, request, search


def note(mem, project, title, body, **kw):
    return mem.remember(project=project, kind="note", type="semantic", title=title, body=body, **kw)


def test_query_terms_are_bounded():
    terms = request.tsquery_terms(" ".join(f"word{i}" for i in range(500)))
    assert len(terms) == 32
    assert request.tsquery_terms("What is the; DROP TABLE x --") == ["drop", "table"]


def test_request_parameters_carry_the_filters_and_the_ored_terms():
    params = request.request_params("acme", ["deploy", "window"], 5, datetime(2024, 1, 1), False, kinds=("gotcha",))
    assert params["tsquery"] == "deploy | window" and params["kinds"] == ["gotcha"] and params["paths"] is None
    assert params["candidates"] == V.RECALL_CANDIDATES


def test_ef_search_grows_with_the_project_between_its_bounds(mem, conn):
    """The request sets hnsw.ef_search for the project's size: sqrt(units), between the floor and the ceiling."""
    note(mem, "acme", "Deploy window", "Deploys happen on Tuesdays.")
    actor = authz.Actor("t", read=("acme",))
    floor = max(V.HNSW_EF_SEARCH, request.hnsw_candidates(10) * V.HNSW_OVERFETCH)
    for units, expected in ((1, floor), (200**2, 200), (10**7, V.HNSW_EF_SEARCH_MAX)):
        conn.execute("UPDATE memory_projects SET last_number = %s WHERE project = 'acme'", (units,))
        with authz.scoped(conn, actor):
            context = request.request_context(conn, "acme", 10, planned=False)
            assert (context.units, context.ef_search) == (units, expected)
            assert conn.execute("SELECT current_setting('hnsw.ef_search')").fetchone()[0] == str(expected)


def test_a_projects_own_statement_is_planned_once_another_on_the_exact_path_per_request(mem, conn):
    """A statement with its project as a literal (database.project_plan) is planned once: the plan knows the
    project's size. The statement made for any project is planned per request under HNSW_MIN_PROJECT_UNITS (a plan
    made for any project cannot know the project's size: a 1,000-unit project beside a 100,000-unit one ran 6x
    slower with it) and once above (PostgreSQL's own choice planned it anew for every request); either setting is
    local to the request."""
    note(mem, "acme", "Deploy window", "Deploys happen on Tuesdays.")
    actor = authz.Actor("t", read=("acme",))
    for units, planned, mode in ((V.HNSW_MIN_PROJECT_UNITS - 1, False, "force_custom_plan"),
                                 (V.HNSW_MIN_PROJECT_UNITS - 1, True, "force_generic_plan"),
                                 (V.HNSW_MIN_PROJECT_UNITS, False, "force_generic_plan"),
                                 (V.HNSW_MIN_PROJECT_UNITS, True, "force_generic_plan")):
        conn.execute("UPDATE memory_projects SET last_number = %s WHERE project = 'acme'", (units,))
        with authz.scoped(conn, actor):
            request.request_context(conn, "acme", 10, planned=planned)
            assert conn.execute("SELECT current_setting('plan_cache_mode')").fetchone()[0] == mode
        assert conn.execute("SELECT current_setting('plan_cache_mode')").fetchone()[0] == "auto"


def plans_of(conn, marker):
    """The connection's prepared statements holding `marker`, by the project they name ('any': the parameter)."""
    return conn.execute(
        "SELECT coalesce(substring(statement FROM $$project = '([a-z]+)'$$), 'any'), generic_plans, custom_plans"
        " FROM pg_prepared_statements WHERE strpos(statement, %s) > 0 ORDER BY 1", (marker,)).fetchall()


def test_a_connection_plans_a_found_project_once_and_any_other_per_request(mem, monkeypatch):
    """After a project's first request finds it has units, the connection keeps the candidates statement with the
    project as a literal: one generic plan, made for that project. A project past PROJECT_PLANS_PER_CONNECTION, or a
    name that finds nothing (it takes no place), shares the statement made for any project, planned per request, so
    the plans a connection holds stay bounded (~1.34 MB each)."""
    monkeypatch.setattr(V, "PROJECT_PLANS_PER_CONNECTION", 2)
    projects = ("acme", "nothing", "beta", "gamma")
    for project in ("acme", "beta", "gamma"):
        note(mem, project, "Deploy window", f"Deploys of {project} happen on Tuesdays.")
    mem.encoder(V.DEFAULT_SERVING_MODEL, "load the model")  # each request runs the candidates statement, then the
    with mem.connection() as conn:  # dense leg alone (the query encoded meanwhile; these projects are small), each so
        for _ in range(3):
            for project in projects:
                mem.encoder.clear()
                titles = [h.title for h in search.recall(conn, project, "when do deploys happen", encoder=mem.encoder)]
                assert titles == ([] if project == "nothing" else ["Deploy window"])
        plans = [plans_of(conn, marker) for marker in ("sparse AS MATERIALIZED", "FROM nearest n ORDER BY n.distance")]
    assert plans == [[("acme", 2, 0), ("any", 0, 8), ("beta", 2, 0)]] * 2


def test_the_query_side_rounds_plan_their_terms_as_the_candidates_are_planned(mem, monkeypatch):
    """The plan mode a request sets lasts for its transaction: the query-side rounds' term statement is the
    project's own where the candidates statement is (a generic plan made for any project would not know the
    project's size), and shares the statement planned per request where it is not."""
    monkeypatch.setattr(V, "PROJECT_PLANS_PER_CONNECTION", 1)
    for project in ("acme", "beta"):
        note(mem, project, "Deploy window", f"Deploys of {project} happen on Tuesdays after the review.")
        note(mem, project, "Review", f"The review of {project} deploys happens on Mondays.")
    with mem.connection() as conn:
        for _ in range(3):
            for project in ("acme", "beta"):
                search.recall(conn, project, "when do deploys happen", encoder=mem.encoder, prf=True)
        terms = plans_of(conn, "Candidate expansion terms")
    assert terms == [("acme", 2, 0), ("any", 0, 4)]


def test_a_sparse_request_prepares_the_serving_models_statement_not_a_second_one(mem):
    """A request without a query vector composes the candidates statement for the serving model, as a dense request
    does, so a project's own plans are one per serving model, not one more for the default model."""
    served = next(key for key in V.EMBEDDING_MODELS if key != V.DEFAULT_SERVING_MODEL)
    note(mem, "acme", "Deploy window", "Deploys happen on Tuesdays.")
    mem.set_serving_model(served)
    with mem.connection() as conn:
        for _ in range(2):
            assert [h.title for h in search.recall(conn, "acme", "when do deploys happen", legs="sparse",
                                                   serving_model=served)] == ["Deploy window"]
        composed = conn.execute(
            "SELECT strpos(statement, %s) > 0 FROM pg_prepared_statements"
            " WHERE strpos(statement, 'sparse AS MATERIALIZED') > 0", (f"'{served}'",)).fetchall()
    assert composed == [(True,), (True,)]  # the statement made for any project, then the project's own


def test_a_request_starts_no_parallel_workers_however_cheap_the_planner_thinks_them(mem, conn, embedder):
    """At 100k units the planner gave the HNSW path's exact fallback two workers, started for every request (~7 ms)
    though the fallback seldom runs: the request turns parallel plans off for itself. Parallelism made as cheap as
    it gets shows the statement would take workers without that."""
    note(mem, "acme", "Deploy window", "Deploys happen on Tuesdays.")
    actor = authz.Actor("t", read=("acme",))
    conn.execute("UPDATE memory_projects SET last_number = %s WHERE project = 'acme'", (V.HNSW_MIN_PROJECT_UNITS,))
    model = V.DEFAULT_SERVING_MODEL
    params = legs.statement_params(request.request_params("acme", ["deploy"], 10, datetime.now(UTC), False),
                                   embedder.encode(["deploy window"])[0], sparse=True)
    explain = "EXPLAIN " + embeddings.model_query("recall/candidates", model)
    plans = {}
    for with_context in (False, True):
        with authz.scoped(conn, actor):
            for setting in ("parallel_setup_cost", "parallel_tuple_cost", "min_parallel_table_scan_size",
                            "min_parallel_index_scan_size"):
                conn.execute(sql.SQL("SET LOCAL {} = 0").format(sql.Identifier(setting)))
            if with_context:
                request.request_context(conn, "acme", 10, planned=False)
            plans[with_context] = "\n".join(row[0] for row in conn.execute(explain, params))
    assert "Gather" in plans[False], plans[False]
    assert "Gather" not in plans[True], plans[True]
    assert conn.execute("SELECT current_setting('max_parallel_workers_per_gather')").fetchone()[0] != "0"


# Bad and hostile requests alike: nothing reaches SQL that the database would refuse (issue #13).
@pytest.mark.parametrize("overrides,field", [
    ({"project": "bad name!"}, "project"), ({"query": "  "}, "query"), ({"query": "x" * 2001}, "query"),
    ({"k": 0}, "k"), ({"k": 101}, "k"), ({"k": "5"}, "k"), ({"kinds": ["decision"]}, "kinds"),
    ({"types": ["factual"]}, "types"), ({"paths": "src/"}, "paths"), ({"as_of": datetime(2024, 1, 1)}, "as_of"),
    ({"legs": "both"}, "legs"),
    ({"paths": ["src/\x00"]}, "paths[0]"), ({"paths": ["src/\x1b[31m"]}, "paths[0]"), ({"paths": [3]}, "paths[0]"),
    ({"paths": ["p"] * 33}, "paths"), ({"query": "deploy \x00 window"}, "query"), ({"query": "bell \x07"}, "query"),
    ({"k": True}, "k"), ({"kinds": 5}, "kinds"), ({"kinds": "gotcha"}, "kinds"), ({"types": [["semantic"]]}, "types"),
    ({"legs": ["hybrid"]}, "legs"), ({"as_of": "2024-01-01"}, "as_of"),
    ({"as_of": datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14)))}, "as_of"),
    ({"as_of": datetime(9999, 12, 31, 23, 59, tzinfo=timezone(timedelta(hours=-14)))}, "as_of"),
    ({"reader": "ana\x00"}, "persona"), ({"reader": "two words"}, "persona"),
    ({"reader": "zero\u200bwidth"}, "persona"),
    ({"kinds": [V.KINDS[0]] * (len(V.KINDS) + 1)}, "kinds"), ({"types": ["semantic"] * 100_000}, "types"),
])
def test_a_hostile_request_names_its_field(overrides, field):
    """Validation needs no database: each bad argument is refused naming the field and its limit."""
    args = {"project": "acme", "query": "deploy window", "k": 8, "kinds": None, "types": None, "paths": None,
            "as_of": None, "legs": "hybrid", **overrides}
    with pytest.raises(ValidationError) as error:
        request.validate_query(**args)
    assert error.value.field == field


def test_the_reader_is_validated_where_it_enters_the_request():
    with pytest.raises(ValidationError, match="persona: must not contain NUL"):
        request.request_params("acme", ["deploy"], 5, datetime(2024, 1, 1), False, reader="ana\x00")
    assert request.request_params("acme", ["deploy"], 5, datetime(2024, 1, 1), False, reader="")["reader"] == ""


def test_recall_refuses_nul_bytes_and_far_times_before_the_database(mem):
    note(mem, "acme", "Deploy window", "Deploys happen on Tuesdays.")
    for kwargs, field in (({"paths": ["src/\x00"]}, "paths[0]"),
                          ({"actor": authz.Actor(name="ana\x00", read=("acme",))}, "persona"),
                          ({"as_of": datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14)))}, "as_of")):
        with pytest.raises(ValidationError) as error:
            mem.recall("acme", "deploy window", **kwargs)
        assert error.value.field == field
    assert len(mem.recall("acme", "deploy window", as_of=datetime(8999, 1, 1, tzinfo=UTC))) == 1
