"""The rerank stage: skipped with a note without weights; with a cross-encoder (built here from the local MiniLM
weights with a fresh one-label head, so its scores mean nothing: it proves the mechanism, not quality) it loads,
scores the top candidates, reorders by its scores and records the "rerank" component."""

import pytest

from memory_assets import authz
from memory_assets import vocabulary as V
from memory_assets.recall import fusion, recall
from memory_assets.recall import rerank as cross_encoder
from tests.cases import embed_all

FACTS = [("Kettle maintenance", "Kettle ZX-81 needs descaling once a month."),
         ("Boiler upkeep", "Mineral build-up in water boilers is removed with citric acid."),
         ("Kettle purchase", "The ZX-81 kettle was bought in 2019 for the second floor kitchen."),
         ("Parking", "Visitors park on level two of the garage next door."),
         ("Coffee", "The coffee machine on the second floor is descaled by facilities.")]
QUERY = "how often is the kettle descaled"


@pytest.fixture
def facts(mem, conn, embedder):
    for title, body in FACTS:
        mem.remember(project="acme", kind="note", type="semantic", title=title, body=body)
    embed_all(conn, embedder)


def test_without_weights_the_stage_is_skipped_with_a_note(mem, facts, monkeypatch, tmp_path):
    monkeypatch.setenv(V.RERANKER_PATH_ENV, str(tmp_path))  # an empty folder: no weights
    plain = mem.recall("acme", QUERY, k=5)
    asked = mem.recall("acme", QUERY, k=5, rerank=True)
    assert asked.notes == [cross_encoder.missing_note()] and not plain.notes
    assert [h.token for h in asked] == [h.token for h in plain]
    assert all("rerank" not in h.components for h in asked)


def test_a_cross_encoder_rescores_and_reorders_the_top_candidates(mem, facts, monkeypatch, cross_encoder_dir):
    monkeypatch.setenv(V.RERANKER_PATH_ENV, str(cross_encoder_dir))
    plain = mem.recall("acme", QUERY, k=3)
    result = mem.recall("acme", QUERY, k=3, rerank=True)
    assert result.notes == [] and len(result) == 3
    scorer = cross_encoder.configured()
    assert scorer is not None
    everything = mem.recall("acme", QUERY, k=len(FACTS))  # the candidates the stage re-scores (N >= all of them)
    expected = scorer(QUERY, [f"{h.title}\n{h.body}" for h in everything])
    best = sorted(zip(expected, [h.token for h in everything], strict=True), key=lambda s: -s[0])[:3]
    assert [h.token for h in result] == [token for _, token in best]  # ordered by the cross-encoder, cut to k
    for hit, (score, _) in zip(result, best, strict=True):
        assert hit.components["rerank"] == pytest.approx(score, abs=1e-5)
        assert hit.score == pytest.approx(score, abs=1e-5) and "fused_score" in hit.components
    assert {h.token for h in plain} | {h.token for h in result} <= {h.token for h in everything}


def test_the_stage_reorders_by_any_scorer_outside_the_transaction(mem, facts):
    seen = {}

    def by_length(query, texts):  # a stand-in scorer: shorter texts first; it records whether a transaction is open
        with mem.connection() as probe:
            seen["busy"] = probe.info.transaction_status
        return [1 / len(t) for t in texts]

    with mem.connection() as conn:
        result = recall(conn, "acme", QUERY, k=2, actor=authz.Actor.reader("acme"), encoder=mem.encoder,
                        rerank=True, reranker=by_length)
        assert conn.info.transaction_status == 0  # idle: the scorer ran after the transaction ended
    texts = {f"{t}\n{b}": t for t, b in FACTS}
    shortest = sorted(texts, key=len)[:2]
    assert [h.title for h in result] == [texts[t] for t in shortest]
    assert all(h.components["rerank"] > 0 for h in result)


def test_the_cli_switches_the_stages_and_shows_the_note(mem, facts, monkeypatch, tmp_path):
    import json

    from click.testing import CliRunner

    from memory_assets.cli import main

    monkeypatch.delenv(V.RERANKER_PATH_ENV, raising=False)
    out = CliRunner().invoke(main, ["recall", "--project", "acme", "--query", QUERY, "--rerank", "--prf", "--json"],
                             catch_exceptions=False)
    data = json.loads(out.stdout)
    assert data["notes"] == [cross_encoder.missing_note()]
    assert data["hits"] and all("prf" in h["components"] for h in data["hits"])


def test_weights_that_do_not_load_degrade_to_the_fused_ranking_with_a_note(mem, facts, monkeypatch, tmp_path):
    """A folder with a config.json that is no cross-encoder: recall answers with the fused ranking and says why."""
    (tmp_path / "config.json").write_text("{not a model")
    monkeypatch.setenv(V.RERANKER_PATH_ENV, str(tmp_path))
    plain = mem.recall("acme", QUERY, k=3)
    result = mem.recall("acme", QUERY, k=3, rerank=True)
    assert [h.token for h in result.hits] == [h.token for h in plain.hits]
    assert any(note.startswith("rerank skipped") for note in result.notes), result.notes


def test_the_rerank_share_mixes_the_cross_encoders_score_with_the_fused_one(monkeypatch):
    """Below a share of 1 the final score is share x rerank + (1 - share) x the fused score, which the hit keeps as
    fused_score; a scorer that answers for fewer texts than it was given is an error, not a score for every hit."""
    monkeypatch.setattr(V, "RERANK_SHARE", 0.5)
    fused = fusion.Pool.of({"a": {"score": 0.9}, "b": {"score": 0.5}, "c": {"score": 0.1}})
    texts = {u: {"title": u, "body": "body"} for u in fused}
    top = cross_encoder.rerank(lambda query, given: [0.0, 1.0], "q", ["a", "b"], texts, fused, 2)
    assert top == ["b", "a"] and "rerank" not in fused["c"] and fused["c"]["score"] == 0.1
    assert fused["a"] == {"score": 0.5 * 0.9, "fused_score": 0.9, "rerank": 0.0}
    assert fused["b"] == {"score": 0.5 + 0.5 * 0.5, "fused_score": 0.5, "rerank": 1.0}
    with pytest.raises(ValueError, match="1 scores for 2 texts"):
        cross_encoder.rerank(lambda query, given: [1.0], "q", ["a", "b"], texts, fused, 2)
