"""Learned fusion: the weights file recall reads, its fallbacks to the hand-set formula, and the ranker's arithmetic."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import numpy as np
import pytest

from memory_assets import vocabulary as V
from memory_assets.recall import fusion, learned

AT = datetime(2024, 6, 1, tzinfo=UTC)


def details(n: int) -> fusion.Details:
    return fusion.Details.of({f"u{i}": {"number": i, "importance": 0.5, "trust": 0.5, "valid_from": AT,
                                        "personas": None, "session_id": f"s{i % 7}", "recency": 1.0}
                              for i in range(n)})


def candidates(n: int, seed: int = 1) -> dict[str, dict]:
    """n fused candidates with both legs, as fuse() and the lifts leave them."""
    rng = np.random.default_rng(seed)
    dense = [(f"u{i}", float(d), True) for i, d in enumerate(sorted(rng.uniform(0.2, 0.9, n)))]
    sparse = [(f"u{i}", float(s), True) for i, s in enumerate(sorted(rng.uniform(0, 3, n), reverse=True))][: n // 2]
    rng.shuffle(sparse)
    fused = fusion.fuse(dense, sparse, (V.DENSE_WEIGHT, V.SPARSE_WEIGHT))
    fusion.spread_to_neighbours(fused, [("u0", "u1", 1), ("u0", "u2", 2)])
    fusion.lift_sessions(fused, details(n))
    return fused


def model(**overrides) -> learned.FusionModel:
    """A model over every component: the dense similarity first, the sparse score second."""
    features = ("dense", "sparse@max", "session", "dense*time")
    return learned.FusionModel(components=learned.COMPONENTS, features=features,
                               weights=np.array([4.0, 1.0, 0.5, 2.0]), bias=-2.0,
                               meta={"version": "test"}) if not overrides else learned.FusionModel(**overrides)


@pytest.fixture
def weights(tmp_path, monkeypatch):
    """A weights file recall reads instead of the packaged one."""
    path = tmp_path / "fusion_weights.json"
    monkeypatch.setenv(V.FUSION_WEIGHTS_ENV, str(path))
    return path


def handset_scores(n: int) -> dict[str, float]:
    fused = candidates(n)
    fusion.handset(fused, details(n), "plain words", AT)
    return {u: e["score"] for u, e in fused.items()}


def test_without_a_weights_file_the_hand_set_formula_scores(weights):
    fused = candidates(40)
    assert fusion.score(fused, details(40), "plain words", AT) == []
    assert {u: e["score"] for u, e in fused.items()} == handset_scores(40)


def test_a_valid_weights_file_replaces_the_final_score_with_the_ranker(weights):
    learned.write(model(), weights)
    fused = candidates(40)
    handset = fused.copy()  # what the ranker reads: every component, the hand-set score among them
    fusion.handset(handset, details(40), "plain words", AT)
    assert fusion.score(fused, details(40), "plain words", AT) == []
    ids = list(fused)
    expected = learned.score_matrix(model(), learned.matrix([handset[u] for u in ids], learned.COMPONENTS))
    assert [fused[u]["score"] for u in ids] == expected.tolist()
    assert {u: e["score"] for u, e in fused.items()} != handset_scores(40)
    assert all(0 < e["score"] < 1 for e in fused.values())
    top = max(ids, key=lambda u: fused[u]["score"])  # sigmoid(-2 + 4*dense + sparse/max + 0.5*session)
    x = fused[top]
    assert x["score"] == pytest.approx(1 / (1 + np.exp(-(-2 + 4 * x["dense"] + (x["sparse"] or 0) / max(
        e["sparse"] or 0 for e in fused.values()) + 0.5 * x.get("session", 0)))))


@pytest.mark.parametrize("content", [
    "{not json", json.dumps({"format": 99, "components": [], "features": [], "weights": [], "bias": 0}),
    json.dumps({"format": V.FUSION_WEIGHTS_FORMAT, "components": ["dense"], "features": ["dense", "sparse"],
                "weights": [1.0, 2.0], "bias": 0.0}),
    json.dumps({"format": V.FUSION_WEIGHTS_FORMAT, "components": ["dense"], "features": ["dense"],
                "weights": [1.0, 2.0], "bias": 0.0}),
    json.dumps({"format": V.FUSION_WEIGHTS_FORMAT, "components": ["dense"], "features": ["dense"]}),
    json.dumps({"format": V.FUSION_WEIGHTS_FORMAT, "components": ["dense"], "features": ["dense"],
                "weights": None, "bias": 0.0}),
    json.dumps({"format": V.FUSION_WEIGHTS_FORMAT, "components": ["dense"], "features": ["dense"],
                "weights": 1.0, "bias": 0.0}),
    json.dumps({"format": V.FUSION_WEIGHTS_FORMAT, "components": ["dense"], "features": ["dense"],
                "weights": [[1.0]], "bias": 0.0}),
], ids=["corrupt", "other format", "unlisted component", "weights do not match", "no weights", "null weights",
        "scalar weights", "nested weights"])
def test_an_unusable_weights_file_falls_back_with_a_note(weights, content):
    weights.write_text(content)
    fused = candidates(30)
    notes = fusion.score(fused, details(30), "plain words", AT)
    assert len(notes) == 1 and notes[0].startswith("learned fusion off") and weights.name in notes[0], notes
    assert {u: e["score"] for u, e in fused.items()} == handset_scores(30)


def test_a_component_the_file_was_not_fitted_on_falls_back_until_refitted(weights):
    learned.write(model(), weights)
    fused = candidates(30)
    fused.column("prf")[:] = 0.3  # a new leg's component
    notes = fusion.score(fused, details(30), "plain words", AT)
    assert notes == ["learned fusion off: the weights file was fitted without prf; refit it"]
    assert {u: e["score"] for u, e in fused.items()} == handset_scores(30)


def test_off_forces_the_hand_set_formula(weights, monkeypatch):
    learned.write(model(), weights)
    monkeypatch.setenv(V.FUSION_WEIGHTS_ENV, "off")
    fused = candidates(30)
    fusion.score(fused, details(30), "plain words", AT)
    assert {u: e["score"] for u, e in fused.items()} == handset_scores(30)


def test_the_weights_file_is_reread_when_it_changes(weights):
    learned.write(model(), weights)
    assert learned.load(weights)[0].bias == -2.0
    changed = model()
    learned.write(learned.FusionModel(changed.components, changed.features, changed.weights, bias=1.5), weights)
    assert learned.load(weights)[0].bias == 1.5


def test_features_are_products_and_request_maxima():
    base = np.array([[0.5, 2.0, 1.0], [0.25, 4.0, 0.0], [1.0, 0.0, 3.0]])
    out = learned.design(base, ("a", "b", "c"), ("a", "b@max", "a*c", "a*b@max"))
    assert out.tolist() == [[0.5, 0.5, 0.5, 0.25], [0.25, 1.0, 0.0, 0.25], [1.0, 0.0, 3.0, 0.0]]
    assert learned.design(np.zeros((2, 1)), ("a",), ("a@max",)).tolist() == [[0.0], [0.0]]  # no maximum: 0


def test_the_packaged_weights_file_is_usable_when_shipped_and_its_absence_means_the_hand_set_formula():
    """No file ships today (the fit did not rise out of fold): recall then scores by hand, saying nothing; a file
    that ships must load, cover every component and carry where it came from and what it bought."""
    if not learned.PACKAGED.exists():
        assert learned.active(set(learned.COMPONENTS)) == (None, None)
        return
    found, note = learned.load(learned.PACKAGED)
    assert found is not None, note
    assert set(learned.COMPONENTS) <= set(found.components)
    assert {"version", "fitted_at", "data", "command", "figures"} <= set(found.meta)
    for units in ("dialog", "observation"):
        figures = found.meta["figures"][units]
        assert figures["learned"]["recall_at"]["10"] > figures["handset"]["recall_at"]["10"], units


def test_the_hand_set_score_is_a_feature_the_ranker_starts_from(weights):
    """A model of the hand-set score alone ranks as the hand-set formula does (what the fit starts from)."""
    learned.write(learned.FusionModel(components=learned.COMPONENTS, features=(learned.HANDSET,),
                                      weights=np.array([5.0])), weights)
    fused, expected = candidates(60), handset_scores(60)
    fusion.score(fused, details(60), "plain words", AT)
    assert fusion.ranked(fused, details(60), 60) == sorted(expected, key=lambda u: (-expected[u], int(u[1:])))
    assert all(fused[u]["score"] == pytest.approx(1 / (1 + np.exp(-5 * expected[u]))) for u in fused)
