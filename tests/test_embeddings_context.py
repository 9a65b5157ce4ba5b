"""The context-aware text version (c1): each turn embedded with its speaker and the previous turn of its session,
the digest over that exact text, private turns kept out of shared vectors, and re-embedding when a neighbour
changes."""


import pytest

from memory_assets import authz, embeddings, lifecycle
from memory_assets import vocabulary as V
from tests.cases import REPO, T1

C1 = "minilm-l6@gt0.1-c1"


@pytest.fixture(scope="module")
def c1():
    return embeddings.embedder_for(C1)


def turn(mem, number, speaker, text, session, **kw):
    return mem.remember(project="chat", kind="note", type="episodic", title=text[:80], body=text, persona=speaker,
                        session_id=session, task_id=f"turn-{number}", confidence=0.9, **kw)


def texts_by_token(conn, model):
    units = embeddings.stale_units(conn, model, limit=100)
    numbers = dict(conn.execute("SELECT id, number FROM memory_units").fetchall())
    return {f"mem-{numbers[u[0]]}": text for u, text in
            zip(units, embeddings.texts_of(embeddings.model_spec(model), units), strict=True)}


def test_c1_embeds_each_turn_with_its_speaker_and_the_previous_turn_of_its_session(mem, conn):
    turn(mem, 1, "Caroline", "How was the pottery class yesterday?", "s1")
    turn(mem, 2, "Melanie", "Wonderful, I made a blue bowl for the kids.", "s1")
    turn(mem, 3, "Caroline", "I went to an LGBTQ support group on Monday.", "s2")
    mem.remember(project="chat", kind="note", type="semantic", title="Melanie makes pottery",
                 body="Melanie took a pottery class and made a bowl.")
    texts = texts_by_token(conn, C1)
    assert texts["mem-1"] == "Caroline: How was the pottery class yesterday?\nHow was the pottery class yesterday?"
    assert texts["mem-2"] == ("Melanie: Wonderful, I made a blue bowl for the kids.\n"
                              "Wonderful, I made a blue bowl for the kids.\n"
                              "Caroline: How was the pottery class yesterday?")
    assert texts["mem-3"].count("\n") == 1  # the turn before is of another session: no context
    assert texts["mem-4"] == embeddings.embedding_text("t1", "Melanie makes pottery",
                                                       "Melanie took a pottery class and made a bowl.", [])
    assert texts_by_token(conn, T1)["mem-2"] == ("Wonderful, I made a blue bowl for the kids.\n"
                                                 "Wonderful, I made a blue bowl for the kids.")


def test_the_speaker_is_not_repeated_and_the_context_is_bounded():
    long = "x" * 2000
    text = embeddings.embedding_text("c1", "Jon: hi", "Jon: hi there", [], "Jon", "Gina", long)
    own, context = text.split("\n")[:2], text.split("\n")[2]
    assert own == ["Jon: hi", "Jon: hi there"]
    assert context == f"Gina: {'x' * V.EMBED_CONTEXT_MAX_CHARS}"


def test_the_stored_digest_covers_the_exact_embedded_text_with_its_context(mem, conn, c1):
    turn(mem, 1, "Caroline", "How was the pottery class yesterday?", "s1")
    turn(mem, 2, "Melanie", "Wonderful, I made a blue bowl for the kids.", "s1")
    units = embeddings.stale_units(conn, C1, limit=10)
    texts = embeddings.texts_of(c1.spec, units)
    assert embeddings.embed_units(conn, c1, units) == 2
    stored = dict(conn.execute("SELECT unit_id, text_digest FROM memory_embeddings WHERE model_key = %s",
                               (C1,)).fetchall())
    assert [stored[u[0]] for u in units] == [embeddings.digest(t) for t in texts]
    assert "Caroline: How was" in texts[1]


def test_a_private_turn_or_speaker_never_enters_a_vector(mem, conn):
    """Not a shared turn's, and not one of a unit private to the same persona either: another source sharing that
    unit's content later makes it (and its vector) shared without re-embedding it."""
    turn(mem, 1, "ana", "My door code is the year the lighthouse was built.", "s1", visibility="private")
    turn(mem, 2, "bo", "Nice, the lighthouse tour starts at noon.", "s1")
    turn(mem, 3, "ana", "I will bring the lighthouse photos.", "s1", visibility="private")
    turn(mem, 4, "ana", "And the spare key sits under the blue pot.", "s1", visibility="private")
    texts = texts_by_token(conn, C1)
    assert "door code" not in texts["mem-2"] and texts["mem-2"].count("\n") == 1
    # a private turn may read the shared turn before it: every reader of it may read that one too
    assert texts["mem-3"].endswith("bo: Nice, the lighthouse tour starts at noon.")
    # ...but never the private turn before it, nor its own private speaker
    assert "lighthouse photos" not in texts["mem-4"] and "door code" not in texts["mem-4"]
    assert not any(text.startswith("ana:") for text in texts.values())


def test_a_vector_read_before_its_previous_turn_was_forgotten_is_never_written(mem, conn, c1):
    """The embedder read the context, then the previous turn was forgotten before the write: the write is refused
    (the previous turn is re-checked, locked, at its revision), so forgotten text never comes back into a vector."""
    turn(mem, 1, "Caroline", "My locker code is 4471, keep it safe.", "s1")
    turn(mem, 2, "Melanie", "Sure, I will keep the number to myself.", "s1")
    units = embeddings.stale_units(conn, C1, limit=10)
    texts = embeddings.texts_of(c1.spec, units)
    assert "4471" in texts[1]  # read while the first turn was live
    lifecycle.forget(conn, "chat", "mem-1", authz.Actor.for_project("chat", forget=True), reason="asked")
    written = embeddings.write_vectors(conn, c1.spec, units, texts, c1.encode(texts))
    assert written == 0  # the forgotten turn's own vector and the follower's that embeds it: both refused
    assert conn.execute("SELECT count(*) FROM memory_embeddings").fetchone() == (0,)


def test_a_corrected_previous_turn_re_embeds_the_turn_after_it_and_then_nothing(mem, conn, c1, today):
    turn(mem, 1, "Caroline", "How was the pottery class yesterday?", "s1")
    turn(mem, 2, "Melanie", "Wonderful, I made a blue bowl for the kids.", "s1")
    turn(mem, 3, "Caroline", "Lovely, send me a photo of it.", "s1")
    assert embeddings.embed_day(conn, c1, today)["written"] == 3
    assert embeddings.embed_day(conn, c1, today)["written"] == 0
    before = dict(conn.execute("SELECT unit_id, text_digest FROM memory_embeddings").fetchall())
    mem.correct("chat", "mem-1", body="How was the painting class yesterday?")
    # the corrected turn (new revision) and the turn after it (same revision, new context); not the third
    assert embeddings.embed_day(conn, c1, today) == {"embedded": 2, "written": 2}
    after = dict(conn.execute("SELECT unit_id, text_digest FROM memory_embeddings").fetchall())
    assert sum(before[u] != after[u] for u in before) == 2
    assert embeddings.embed_day(conn, c1, today)["written"] == 0
    # the journal path finds the follower the same way
    embeddings.embed_changes(conn, c1)
    mem.correct("chat", "mem-2", body="Wonderful, I made a green vase for the kids.")
    assert embeddings.embed_changes(conn, c1) == {"changes": 1, "embedded": 2}
    assert embeddings.embed_day(conn, c1, today)["written"] == 0


def test_forgetting_a_turn_deletes_the_vector_of_the_turn_after_it_at_once_and_the_sensor_re_embeds_that_turn(
        mem, conn, c1, today):
    turn(mem, 1, "Caroline", "My locker code is 4471, keep it safe.", "s1")
    turn(mem, 2, "Melanie", "Sure, I will keep the number to myself.", "s1")
    turn(mem, 3, "Caroline", "Thanks.", "s1")
    embeddings.embed_day(conn, c1, today)
    embeddings.embed_day(conn, embeddings.embedder_for(T1), today)
    mem.set_serving_model(C1)
    position = embeddings.stale_days_since(conn, (0, 0)).position  # the sensor's cursor after the turns
    ids = dict(conn.execute("SELECT number, id FROM memory_units").fetchall())
    lifecycle.forget(conn, "chat", "mem-1", authz.Actor.for_project("chat", forget=True), reason="asked")
    vectors = dict(conn.execute("SELECT unit_id, count(*) FILTER (WHERE model_key = %s) FROM memory_embeddings "
                                "GROUP BY unit_id", (C1,)).fetchall())
    # in the forget's own transaction: its vectors, and the c1 vectors of the turns within the context scan after
    # it (any of them may read it as its previous turn); t1's vectors of the others stay
    t1 = dict(conn.execute("SELECT unit_id, count(*) FROM memory_embeddings WHERE model_key = %s GROUP BY unit_id",
                           (T1,)).fetchall())
    assert ids[1] not in vectors and vectors[ids[2]] == vectors[ids[3]] == 0 and t1[ids[2]] == t1[ids[3]] == 1
    stale = embeddings.stale_days_since(conn, position)
    assert stale.changes == 1 and set(stale.days) == {today}  # the followers' day
    assert embeddings.embed_day(conn, c1, today) == {"embedded": 2, "written": 2}
    new = conn.execute("SELECT text_digest FROM memory_embeddings WHERE unit_id = %s AND model_key = %s",
                       (ids[2], C1)).fetchone()
    text = embeddings.embedding_text("c1", "Sure, I will keep the number to myself.",
                                     "Sure, I will keep the number to myself.", [], "Melanie")
    assert "4471" not in text and embeddings.digest(text) == new[0]


def test_the_forget_trigger_scans_as_far_back_as_the_context_reads():
    """The migration's SQL names the scan width by number: it must be the vocabulary's."""
    sql = (REPO / "sql" / "015_forget_context_vectors.sql").read_text()
    assert f"NEW.number + {V.EMBED_CONTEXT_SCAN}" in sql and f"EMBED_CONTEXT_SCAN = {V.EMBED_CONTEXT_SCAN}" in sql
    assert all(version.startswith("c") and version[1:].isdigit() for version in V.CONTEXT_TEXT_VERSIONS)
