"""The recall legs and follow-ups as SQL: every candidate with what scoring reads of it in one statement, and the
cited text of the top k."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import psycopg
from psycopg.rows import dict_row

from memory_assets import embeddings, tracing
from memory_assets import vocabulary as V
from memory_assets.database import execute_positional, keep_project_plans, known_units, one, project_plan, query
from memory_assets.recall.fusion import Details
from memory_assets.recall.request import hnsw_candidates, send_request_context

Row = tuple[Any, ...]  # (unit_id, score or distance, episodic); neighbours: (seed, unit_id, distance)
CONTEXT_COLUMNS = 5  # recall/candidates' first columns, set on its context row alone: the serving model, the
# project's size, the sparse leg's (unit, term) pairs, the snapshot, whether it details every unit
CONTEXT_EVERY_UNIT = 4


class Candidates(NamedTuple):
    """One request's candidates: each leg's rows in rank order, the turns next to every episodic candidate (their
    sessions are in the details), and what scoring reads of every unit among them, or of every unit the request may
    return in a small project (by unit id; legs.candidates_while_encoding)."""

    model_key: str
    units: int
    dense: list[Row]
    sparse: list[Row]
    near: list[Row]
    details: Details
    text_hits: int  # the (unit, term) pairs the sparse leg read: its cost, which its rarest terms bound (sql/031)
    planned: bool  # the statement was the project's own (database.project_plan), planned once
    every_unit: bool  # the statement detailed every unit recall may return, and left its neighbouring turns out
    snapshot: str | None  # what the statement read (recall/_snapshot; None: no telling on a standby)


def candidates(conn: psycopg.Connection[Any], params: dict[str, Any], model_key: str, vector: Any,
               sparse: bool) -> Candidates:
    """Both legs, the neighbouring turns and the scoring details in one prepared statement (its plan the project's
    own where the connection keeps one, database.project_plan), after the request's context (HNSW knobs, plan mode)
    in the same round trip when the connection is in pipeline mode.

    `model_key` is the model `vector` was encoded for (None: no dense leg); a serving model that differs gives no
    dense rows and says which model serves.
    """
    statement, planned = send_candidates_context(conn, params, model_key)
    return received(conn, params["project"], planned,
                    send_candidates(conn, statement, statement_params(params, vector, sparse)))


def candidates_while_encoding(conn: psycopg.Connection[Any], params: dict[str, Any], model_key: str,
                              encode: Callable[[], Any]) -> tuple[Candidates, Any]:
    """candidates() for a query not yet encoded, in pipeline mode: the full-text leg (with its seeds' neighbouring
    turns and its units' details) goes to the server first and runs there while `encode` runs here, then the dense
    leg with the vector, the same statement with the other leg switched off; merged, the two give what the one
    statement gives. In a project of at most RECALL_ALL_DETAILS_MAX_UNITS units the full-text statement details
    every unit recall may return, so the dense statement is the nearest vectors alone (recall/dense_vectors, checked
    against those details), and both legs' seeds' neighbours come from those details; a question whose vector is at
    hand in a project this connection last found that small (known_small) is asked so too, `encode` returning it.
    Returns the candidates and the vector (None: the model was unavailable, the full-text leg's candidates alone)."""
    statement, planned = send_candidates_context(conn, params, model_key)
    unused = np.zeros(embeddings.model_spec(model_key).dim, dtype=np.float32)  # typed as the query's vector: the
    # two statements are one prepared statement with one plan (a NULL vector would prepare a second, ~1.3 MB each)
    full_text = {**statement_params(params, None, True), "vector": unused, "all_details": True}
    sparse_sent = send_candidates(conn, statement, full_text)
    conn.pgconn.send_flush_request()  # the server sends the full-text answer once it is ready, not when asked next:
    conn.pgconn.flush()  # it is in by the time the question is encoded (a request left in libpq's buffer goes next)
    vector = encode()
    if vector is None:
        return received(conn, params["project"], planned, sparse_sent), None
    first = one(sparse_sent)  # that answer fetched alone, its rows parsed below while the server runs the dense leg:
    # a fetch waits for the answer of every statement sent so far (psycopg's pipeline), so the dense statement goes
    # after it, one round trip more where the vector was at hand (sent with it: 0.99x the one statement, not 0.92x)
    dense = statement_params(params, vector, False)
    found = None
    if first[CONTEXT_EVERY_UNIT]:  # the statement detailed every unit recall may return: the vectors alone
        vectors, _ = project_plan(conn, embeddings.model_query("recall/dense_vectors", model_key), params["project"])
        nearest = execute_positional(conn, vectors, dense)  # planned as the candidates statement (the same project
        # on the same connection)
        found = received(conn, params["project"], planned, sparse_sent, first)
        alone = leg_alone(conn, vectors, nearest, found, dense)
        if alone is not None:
            return alone, vector
    dense_sent = send_candidates(conn, statement, dense)
    if found is None:  # a larger project: the statement found its seeds' neighbours itself
        found = received(conn, params["project"], planned, sparse_sent, first)
    return merged(found, received(conn, params["project"], planned, dense_sent)), vector


def known_small(conn: psycopg.Connection[Any], project: str) -> bool:
    """Whether this connection's last request of the project found it small enough for the full-text statement to
    detail every unit (RECALL_ALL_DETAILS_MAX_UNITS, on the exact path): a question whose vector is at hand is then
    asked as the two statements with the nearest vectors alone (the one statement 1.09x their time on LoCoMo); a
    project grown past it since costs one request the two statements merged."""
    units = known_units(conn, project)
    return units is not None and units <= V.RECALL_ALL_DETAILS_MAX_UNITS and units < V.HNSW_MIN_PROJECT_UNITS


def leg_alone(conn: psycopg.Connection[Any], vectors: str, nearest: psycopg.Cursor[Any], found: Candidates,
              params: dict[str, Any]) -> Candidates | None:
    """The full-text statement's candidates with the dense leg ranked from the nearest vectors recall/dense_vectors
    returned (`vectors`, sent as `nearest`), as recall/_dense_leg ranks its exact scan: by distance then number, each
    vector current_vectors keeps; where the over-fetch kept fewer than the leg's candidates, from every vector of the
    project, as the leg's exact fallback reads them. Its seeds' neighbouring turns are worked out from the details.
    None where the vectors cannot stand for the leg (current_vectors): the dense statement then runs again with its
    details, as for a larger project."""
    with tracing.span("memory.recall.legs") as span:
        rows = nearest.fetchall()  # the serving model and the snapshot alone first, then the vectors by distance
        kept = current_vectors(rows, found)
        if kept is not None and len(kept) < params["candidates"] and len(rows) - 1 >= params["exact_overfetch"]:
            rows = execute_positional(conn, vectors, {**params, "exact_overfetch": found.units + 1}).fetchall()
            kept = current_vectors(rows, found)  # every vector: a project has no more than its numbered units
        if kept is None:
            return None
        kept.sort()  # (distance, number): a unit's number is its own in the project
        dense = [(unit_id, distance, episodic) for distance, _, unit_id, episodic in kept[: params["candidates"]]]
        near = neighbours(dense, found.details)
        tracing.record(span, dense=len(dense), sparse=0, near=len(near), rows=len(dense), text_hits=0,
                       planned=found.planned)
    return found._replace(model_key=rows[0][0], dense=dense, near=list(dict.fromkeys(found.near + near)))


def current_vectors(rows: list[Row], found: Candidates) -> list[Row] | None:
    """(distance, number, unit id, episodic) of each of recall/dense_vectors' vectors whose unit is among the details
    of every unit recall may return, at the revision and content hash the vector was written for (the filters leave
    the others out, and a unit changed since has a stale vector); None where they cannot stand for the leg: the two
    statements read different snapshots (a commit between them in a caller's READ COMMITTED transaction; recall's
    own transaction reads one), or a distance is not a number (a zero query vector: the statement's own order
    stands)."""
    (_, snapshot, *_), *vectors = rows  # the context row first (recall/dense_vectors)
    if snapshot is None or snapshot != found.snapshot:
        return None
    if not vectors:  # the project has no vectors of the model
        return []
    if math.isnan(vectors[-1][3]):  # the statement sorts a NaN distance last
        return None
    details, kept = found.details, []
    at, version, number, episodic = details.at, details.version, details.number.tolist(), details.episodic
    for _, _, unit_id, distance, revision, content_hash in vectors:
        where = at.get(unit_id)
        if where is not None and version[where] == (revision, content_hash):
            kept.append((distance, number[where], unit_id, episodic[where]))
    return kept


def merged(found: Candidates, dense: Candidates) -> Candidates:
    """The full-text statement's candidates and the dense one's as the one statement gives them: a unit both detail
    is as the dense one read it, the later (in a caller's READ COMMITTED transaction, a later snapshot)."""
    return dense._replace(sparse=found.sparse, near=list(dict.fromkeys(found.near + dense.near)),
                          details=dense.details.joined(found.details), text_hits=found.text_hits)


def neighbours(leg: list[Row], details: Details) -> list[Row]:
    """The (seed, turn, distance) rows recall/candidates' `near` gives for a leg's seeds, from the details of every
    unit recall may return (Details.turns: the episodic ones by number): those numbered within CONTEXT_WINDOW of an
    episodic seed among the leg's top CONTEXT_SEED_RANK."""
    turns = details.turns
    steps = [step for step in range(-V.CONTEXT_WINDOW, V.CONTEXT_WINDOW + 1) if step]
    rows: list[Row] = []
    for seed, _, episodic in leg[: V.CONTEXT_SEED_RANK]:
        if episodic:
            number = int(details.number[details.at[seed]])
            rows += [(seed, turns[number + step], abs(step)) for step in steps if number + step in turns]
    return rows


def received(conn: psycopg.Connection[Any], project: str, planned: bool, sent: psycopg.Cursor[Any],
             first: Row | None = None) -> Candidates:
    """The candidates a sent statement returns (after `first`, its first row when fetched already); a project with
    units the reader sees may keep its own plan. A full-text statement that detailed every unit recall may return
    left its seeds' neighbouring turns out: they are worked out from the details."""
    with tracing.span("memory.recall.legs") as span:
        found = unpack(sent.fetchall() if first is None else [first, *sent.fetchall()], planned)
        if found.every_unit:
            found = found._replace(near=neighbours(found.sparse, found.details))
        tracing.record(span, dense=len(found.dense), sparse=len(found.sparse), near=len(found.near),
                       rows=len(found.details), text_hits=found.text_hits, planned=planned)
    if found.units > 0:  # a project this reader can see units of: its next requests may run on its own plan
        keep_project_plans(conn, project, found.units)
    return found


def send_candidates(conn: psycopg.Connection[Any], statement: str, params: dict[str, Any]) -> psycopg.Cursor[Any]:
    """Send recall/candidates as composed for the request (send_candidates_context), its validity starts read as
    microseconds (database.execute_positional's times_as_micros: what unpack's details hold)."""
    return execute_positional(conn, statement, params, times_as_micros=True)


def send_candidates_context(conn: psycopg.Connection[Any], params: dict[str, Any],
                            model_key: str) -> tuple[str, bool]:
    """recall/candidates composed for the model, as send_planned gives it for the request's project."""
    return send_planned(conn, embeddings.model_query("recall/candidates", model_key), params["project"], params["k"])


def send_planned(conn: psycopg.Connection[Any], statement: str, project: str, k: int) -> tuple[str, bool]:
    """The statement as this connection plans it for the project (database.project_plan), and whether it is the
    project's own, after sending the request's context, which sets the plan mode to match."""
    statement, planned = project_plan(conn, statement, project)
    send_request_context(conn, project, k, planned=planned)
    return statement, planned


def unpack(rows: list[Row], planned: bool) -> Candidates:
    """The statement's rows (its context, then one per unit) as legs, neighbours and details, read column by column;
    the context row is found by its unit id, NULL, wherever it comes."""
    at = next(at for at, row in enumerate(rows) if row[CONTEXT_COLUMNS] is None)
    context, units = rows[at], rows[:at] + rows[at + 1:]
    (*_, ids, distance, dense_rank, score, sparse_rank, episodic, number, importance, trust, valid_from, personas,
     persona, session_id, recency, sessions, revision, content_hash, near_of, near_distance
     ) = zip(*units, strict=True) if units else ((),) * len(context)
    dense, sparse = leg_rows(dense_rank, ids, distance, episodic), leg_rows(sparse_rank, ids, score, episodic)
    near: list[Row] = []
    for of, unit_id, turns_apart in zip(near_of, ids, near_distance, strict=True):
        if of:  # (seed, unit, turns) rows: the statement's two arrays are the same length
            near.extend((seed, unit_id, apart) for seed, apart in zip(of, turns_apart, strict=True))
    details = Details(ids, {
        "number": number, "importance": importance, "trust": trust, "valid_from_us": valid_from,
        "personas": personas, "persona": persona, "session_id": session_id, "recency": recency, "sessions": sessions,
        "episodic": episodic, "version": list(zip(revision, content_hash, strict=True))})
    model_key, units_numbered, text_hits, snapshot, every_unit = context[:CONTEXT_COLUMNS]
    return Candidates(model_key, int(units_numbered), dense, sparse, near, details, int(text_hits), planned,
                      bool(every_unit), snapshot)


def leg_rows(ranks: tuple[Any, ...], ids: tuple[str, ...], values: tuple[Any, ...], episodic: tuple[bool, ...]
           ) -> list[Row]:
    """A leg's (unit id, score or distance, episodic) rows in the order of its ranks (None: a unit not in the leg)."""
    rows = {rank: (unit_id, value, e) for rank, unit_id, value, e in zip(ranks, ids, values, episodic, strict=True)
            if rank is not None}
    return [rows[rank] for rank in sorted(rows)]


def seedable(found: Candidates) -> set[str]:
    """The episodic candidates that may seed the neighbour spread: each leg's top CONTEXT_SEED_RANK, the candidates
    whose neighbouring turns recall/candidates fetched or legs.neighbours worked out."""
    return {row[0] for rows in (found.dense, found.sparse) for row in rows[: V.CONTEXT_SEED_RANK] if row[2]}


def statement_params(params: dict[str, Any], vector: Any, sparse: bool) -> dict[str, Any]:
    """The parameters of recall/candidates, of recall/dense_vectors (a small project's nearest vectors, sent after the
    full-text statement) and of recall/dense (the dense leg alone, which bench/recall.py times)."""
    return {**params, **embeddings.SERVING_MODEL_PARAMS, "vector": vector, "dense": vector is not None,
            "sparse": sparse, "window": V.CONTEXT_WINDOW, "seed_rank": V.CONTEXT_SEED_RANK,
            "hnsw_min": V.HNSW_MIN_PROJECT_UNITS, "text_index_min": V.TEXT_INDEX_MIN_PROJECT_UNITS,
            "hnsw_candidates": hnsw_candidates(params["k"]),
            "overfetch": hnsw_candidates(params["k"]) * V.HNSW_OVERFETCH, "walk_min_share": V.HNSW_WALK_MIN_SHARE,
            "exact_overfetch": int(params["candidates"] * V.EXACT_OVERFETCH), "all_details": False,
            "all_details_max": V.RECALL_ALL_DETAILS_MAX_UNITS}


def send_cited_text(conn: psycopg.Connection[Any], ids: list[str], reader: str) -> psycopg.Cursor[dict[str, Any]]:
    """Ask for the hits' text, validity and the citations their reader may see; in pipeline mode the answer comes
    with the transaction's COMMIT, in one round trip (cited_text reads it)."""
    cursor = conn.cursor(row_factory=dict_row)
    return cursor.execute(query("recall/cited_text"), {"ids": ids, "reader": reader}, prepare=True)


@tracing.traced("memory.recall.citations", tracing.rows)
def cited_text(sent: psycopg.Cursor[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The hits' text, validity and citations that send_cited_text asked for, by unit id."""
    with sent:
        return {r["unit_id"]: r for r in sent.fetchall()}
