"""The learned fusion's fit and its figures, offline: synthetic questions where one component finds the evidence."""

from __future__ import annotations

import numpy as np

from memory_assets.evaluation import folds
from memory_assets.recall import fusion, learned


def question(rng: np.random.Generator, conversation: str, n: int = 40) -> folds.Asked:
    """n candidates: the hand-set score is noise, the dense similarity marks the two evidence turns."""
    dense = rng.uniform(0.0, 0.5, n)
    dense[:2] += 0.6
    handset = rng.uniform(0.0, 1.0, n)
    components = ("dense", "sparse", learned.HANDSET)
    return folds.Asked(units="dialog", conversation=conversation, category=1, evidence=frozenset({"D1", "D2"}),
                       components=components, base=np.column_stack([dense, np.zeros(n), handset]),
                       handset=handset, numbers=np.arange(n), refs=[frozenset({f"D{i + 1}"}) for i in range(n)],
                       ids=[f"u{i}" for i in range(n)])


def test_the_fit_moves_weight_to_what_finds_the_evidence_and_scores_as_recall_would():
    rng = np.random.default_rng(0)
    asked = [question(rng, f"conv-{i % 3}") for i in range(30)]
    handset = folds.split(asked, [a.handset for a in asked], [1, 2, 10])["dialog"]["recall_at"]
    model = folds.fit(asked, ("dense", "sparse", learned.HANDSET))
    assert model.features == ("dense", "sparse", learned.HANDSET)  # sparse is all 0 but seen: weight 0
    assert model.weights[0] > 0 and model.weights[1] == 0
    fitted = folds.split(asked, folds.model_scores(model, asked), [1, 2, 10])["dialog"]["recall_at"]
    assert fitted["2"] == 1.0 > handset["2"]
    held = folds.out_of_fold(asked, ("dense", learned.HANDSET), [2])
    assert held["per_units"]["dialog"]["recall_at"]["2"] == 1.0
    assert set(held["per_conversation"]) == {"conv-0", "conv-1", "conv-2"}
    scores = folds.model_scores(model, asked[:1])[0]  # what recall computes over the same components
    entries = [dict(zip(("dense", "sparse"), row[:2], strict=True)) | {"score": row[2]} for row in asked[0].base]
    pool = fusion.Pool.of(dict(enumerate(entries)))  # recall's own matrix: the pool's columns
    assert np.array_equal(scores, learned.score_matrix(model, learned.column_matrix(pool.columns, model.components,
                                                                                     len(pool))))


def test_recall_at_counts_evidence_once_and_breaks_ties_by_unit_number():
    a = folds.Asked(units="dialog", conversation="c", category=2, evidence=frozenset({"D1", "D2"}),
                    components=("dense",), base=np.zeros((3, 1)), handset=np.array([0.5, 0.5, 0.9]),
                    numbers=np.array([2, 1, 3]), refs=[frozenset({"D1"}), frozenset({"D1"}), frozenset({"D2"})],
                    ids=["a", "b", "c"])
    assert folds.ranking(a.handset, a.numbers).tolist() == [2, 1, 0]
    assert folds.recall_at(a, a.handset, [1, 2, 3]) == {1: 0.5, 2: 1.0, 3: 1.0}
