"""The query-side rounds on the real store: pseudo-relevance feedback and the entity-seeded second round are off by
default, add named score components when on, find what the first round cannot, and never see what the reader may
not (another project, another persona's private unit)."""

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from memory_assets import authz, embeddings
from memory_assets import vocabulary as V
from memory_assets.recall import expansion
from tests.cases import embed_all

DAY = datetime.now(UTC) - timedelta(days=3)


def turn(mem, project, text, session, persona="caroline", **kw):
    return mem.remember(project=project, kind="note", type="episodic", title=text[:80], body=text, valid_from=DAY,
                        session_id=session, persona=persona, confidence=0.9, **kw)


def filler(mem, project, n, session="S-9"):
    for i in range(n):
        turn(mem, project, f"Agenda item {i} about the garden fence was postponed again.", f"{session}-{i}")


MULTI_HOP = "Which country did the woman Caroline met at the support group settle in?"


def multi_hop_fixture(mem, project="chat"):
    """The question shares words with the first turn only; the second names the same person, not the question's
    words, in another session far from the first (neither neighbour nor session structure reaches it)."""
    met = turn(mem, project, "Caroline: at the support group I met a woman called Jolene.", "S-1")
    filler(mem, project, 6)
    moved = turn(mem, project, "Jolene now lives in Sweden with her two dogs.", "S-2")
    return met, moved


def test_the_rounds_are_off_by_default_and_cost_no_component(mem, conn, embedder):
    multi_hop_fixture(mem)
    embed_all(conn, embedder)
    assert (V.RECALL_PRF, V.RECALL_SECOND_ROUND, V.RECALL_RERANK) == (False, False, False)
    for hit in mem.recall("chat", MULTI_HOP, k=10):
        assert not {"prf", "second_round", "rerank"} & set(hit.components)


def test_the_second_round_finds_the_evidence_that_shares_a_name_with_the_first_rounds_hits(mem):
    met, moved = multi_hop_fixture(mem)
    first = {h.token: h for h in mem.recall("chat", MULTI_HOP, k=20, legs="sparse")}
    assert met.token in first and moved.token not in first  # the question's words never reach it
    second = mem.recall("chat", MULTI_HOP, k=20, legs="sparse", second_round=True)
    hits = {h.token: h for h in second}
    assert hits[moved.token].components["second_round"] > 0
    assert all("second_round" in h.components for h in second)  # numeric everywhere (0 where the round missed)
    assert list(hits).index(met.token) == 0  # the first round's answer stays first
    assert all(0 <= h.score <= 1 for h in second)


def test_prf_adds_the_top_hits_salient_terms_and_moves_the_query_vector(mem, conn, embedder):
    for i, text in enumerate(["The kettle needs descaling: citric acid dissolves the limescale.",
                              "Descaling the kettle with citric acid takes ten minutes.",
                              "Our kettle descaling schedule: citric acid every month."]):
        mem.remember(project="acme", kind="note", type="semantic", title=f"Kettle {i}", body=text)
    target = mem.remember(project="acme", kind="note", type="semantic", title="Cleaning supplies",
                          body="Buy citric acid in bulk from the pharmacy on Elm Street.")
    for i in range(5):
        mem.remember(project="acme", kind="note", type="semantic", title=f"Parking {i}",
                     body=f"Visitors park on level {i} of the garage.")
    embed_all(conn, embedder)
    query = "how do we descale the kettle"
    plain = [h.token for h in mem.recall("acme", query, k=10, legs="sparse")]
    assert target.token not in plain
    hits = {h.token: h for h in mem.recall("acme", query, k=10, legs="sparse", prf=True)}
    assert hits[target.token].components["prf"] > 0 and all("prf" in h.components for h in hits.values())
    with mem.connection() as conn2, authz.scoped(conn2, authz.Actor.reader("acme")):
        ids = [str(r[0]) for r in conn2.execute("SELECT id FROM memory_units WHERE title LIKE 'Kettle%'")]
        params = {"project": "acme", "reader": None, "tsquery": "descale | kettle"}
        fed = expansion.feedback(conn2, params, V.DEFAULT_SERVING_MODEL, ids, units=9, planned=False)
    assert fed.salient[:2] == ["acid", "citric"]  # in every hit, in a fourth unit: the best terms
    assert "kettl" not in fed.salient and "descal" not in fed.salient  # the query's own lexemes are not added
    vector = embeddings.encode_query(V.DEFAULT_SERVING_MODEL, query)
    moved = expansion.rocchio(vector, fed.docs)
    centroid = np.mean([d["embedding"].to_numpy() for d in fed.docs], axis=0)
    assert np.linalg.norm(moved) == pytest.approx(1, abs=1e-5)
    assert float(moved @ centroid) > float(vector @ centroid)


def test_feedback_offers_only_lexemes_the_round_finds_as_themselves(mem, conn):
    """The round's query stems its words, so a stored lexeme that stems again to another ("revision" is stored as
    revis, which stems to revi; "cheese" as chees, to chee) would look for other units or none: such lexemes are not
    offered."""
    for i in range(3):
        mem.remember(project="acme", kind="note", type="semantic", title=f"Kettle {i}",
                     body=f"The kettle revision {i} lists cheese and citric acid.")
    for topic in ("pantry", "cellar"):
        mem.remember(project="acme", kind="note", type="semantic", title=f"The {topic}",
                     body=f"The {topic} revision keeps cheese, citric acid and salt.")
    with authz.scoped(conn, authz.Actor.reader("acme")):
        ids = [str(r[0]) for r in conn.execute("SELECT id FROM memory_units WHERE title LIKE 'Kettle%'")]
        lexemes = {r[0] for r in conn.execute(
            "SELECT unnest(tsvector_to_array(tsv)) FROM memory_units WHERE title LIKE 'Kettle%'")}
        params = {"project": "acme", "reader": None, "tsquery": "kettle"}
        salient = expansion.feedback(conn, params, V.DEFAULT_SERVING_MODEL, ids, units=5, planned=False).salient
    assert {"revis", "chees"} <= lexemes  # in every hit and in two more units: they would rank first
    assert salient == ["list", "acid", "citric"]  # list: only in the hits


def test_entities_are_names_inside_sentences_and_unnamed_personas():
    docs = [{"title": "t", "body": "Melanie: Wonderful, I went to Sweden with Oscar. Then Tim came.",
             "personas": ["Melanie"]},
            {"title": "t", "body": "Yes! I love Paris.", "personas": ["Caroline"]}]
    assert expansion.entities(docs, "Where did Melanie go?") == ["oscar", "sweden", "tim", "caroline", "paris"]


SECRET_NAME = "Zorblatt"


def test_prf_and_the_second_round_never_surface_another_projects_or_a_private_unit(mem, conn, embedder):
    _, moved = multi_hop_fixture(mem, "alpha")
    # the same name and salient terms in another project and in another persona's private turns of this one
    turn(mem, "beta", f"Caroline: Jolene and {SECRET_NAME} moved to Sweden together.", "S-1")
    turn(mem, "beta", f"Caroline: the support group met {SECRET_NAME} in Sweden.", "S-2")
    private = turn(mem, "alpha", f"Ana: Jolene told me {SECRET_NAME} settled in Sweden, keep it quiet.", "S-3",
                   persona="ana", visibility="private")
    embed_all(conn, embedder)
    for reader, may_see_private in ((None, False), ("bo", False), ("ana", True)):
        actor = authz.Actor.reader("alpha", reader) if reader else authz.Actor.reader("alpha")
        for legs in ("hybrid", "sparse"):
            result = mem.recall("alpha", MULTI_HOP, k=20, actor=actor, legs=legs, prf=True, second_round=True)
            texts = " ".join(f"{h.title} {h.body} {h.citations}" for h in result)
            assert all(h.citations and h.citations[0]["persona"] in ("caroline", "ana") for h in result)
            assert (private.token in [h.token for h in result]) == may_see_private, (reader, legs)
            assert (SECRET_NAME in texts) == may_see_private, (reader, legs)
            assert moved.token in [h.token for h in result]
    # an actor without alpha in its read scope gets nothing from any round
    outsider = authz.Actor(name="mallory", read=("beta",))
    assert mem.recall("alpha", MULTI_HOP, k=20, actor=outsider, prf=True, second_round=True).hits == []
