"""The LoCoMo evaluation end to end on a small conversation of the same shape: ingest, ask, score, report."""

import json

import pytest

from memory_assets import vocabulary as V
from memory_assets.errors import ValidationError
from memory_assets.evaluation import folds, locomo
from memory_assets.recall import learned

SAMPLE = {
    "sample_id": "conv-t1",
    "conversation": {
        "speaker_a": "Mira", "speaker_b": "Jon",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Mira", "dia_id": "D1:1", "text": "I adopted a greyhound called Pepper last week!"},
            {"speaker": "Jon", "dia_id": "D1:2", "text": "Congratulations! How is she settling in?"},
            {"speaker": "Mira", "dia_id": "D1:3", "text": "She sleeps all day on the sofa.",
             "blip_caption": "a photo of a dog on a sofa"},
        ],
        "session_2_date_time": "10:04 am on 2 June, 2023",
        "session_2": [
            {"speaker": "Jon", "dia_id": "D2:1", "text": "I started pottery classes in Leeds on Tuesdays."},
            {"speaker": "Mira", "dia_id": "D2:2", "text": "Pottery sounds relaxing, what did you make?"},
            {"speaker": "Jon", "dia_id": "D2:3", "text": "A lopsided teapot for my sister."},
        ],
    },
    "observation": {
        "session_1_observation": {"Mira": [["Mira adopted a greyhound named Pepper.", "D1:1"]]},
        "session_2_observation": {"Jon": [["Jon takes pottery classes in Leeds.", "D2:1"],
                                          ["Jon made a teapot for his sister.", "D2:3"]]},
    },
    "qa": [
        {"question": "What is the name of Mira's greyhound?", "answer": "Pepper", "evidence": ["D1:1"], "category": 4},
        {"question": "Where does Jon take pottery classes?", "answer": "Leeds", "evidence": ["D2:1"], "category": 4},
        {"question": "What did Jon make for his sister?", "answer": "a teapot", "evidence": ["D2:3; D2:2"],
         "category": 1},
        {"question": "What colour is Pepper?", "answer": "", "evidence": ["D9:9"], "category": 2},   # unknown id
        {"question": "Did Jon adopt a cat?", "answer": "", "evidence": [], "category": 5},          # adversarial
    ],
}


def test_questions_parse_evidence_and_skip_what_cannot_be_scored():
    kept, skipped = locomo.questions(SAMPLE, "dialog")
    assert [q.evidence for q in kept] == [{"D1:1"}, {"D2:1"}, {"D2:3", "D2:2"}]
    assert skipped == 1  # category 5 is not asked at all; the unknown id leaves one question without evidence
    assert {q.as_of.isoformat() for q in kept} == {"2023-06-03T10:04:00+00:00"}  # the day after the last session


def test_dialog_turns_become_episodic_notes_dated_by_their_session():
    rows = locomo.candidates(SAMPLE, "dialog")
    assert [r.source_ref for r in rows] == ["D1:1", "D1:2", "D1:3", "D2:1", "D2:2", "D2:3"]
    assert rows[2].body == "Mira: She sleeps all day on the sofa. [shares an image: a photo of a dog on a sofa]"
    assert {r.type for r in rows} == {"episodic"} and rows[3].valid_from.isoformat() == "2023-06-02T10:04:00+00:00"


def test_the_evaluation_ingests_through_the_asset_graph_and_reports_every_leg(mem, tmp_path):
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([SAMPLE]))
    report = locomo.run(mem, data, "dialog", [1, 5], "hybrid", log=lambda message: None)
    assert report["ingest"]["captured"] == 6 and report["questions"] == 3 and report["skipped"] == 1
    assert report["recall_at"]["5"] == 1.0  # six turns: every evidence id is in the top 5
    assert report["recall_at"]["1"] >= 2 / 3, report  # the single-hop answers come first
    assert set(report["per_category"]) == {"single_hop", "multi_hop"}
    assert set(report["side_by_side"]) == {"hybrid", "dense", "sparse"}
    assert report["side_by_side"]["hybrid"] == report["recall_at"]
    for key in ("latency_ms", "latency_cached_ms"):
        assert 0 < report[key]["p50"] <= report[key]["p95"], key
    with mem.connection() as conn:  # the vectors were written by the asset graph, not by the evaluation
        assert conn.execute("SELECT count(*) FROM memory_embeddings WHERE project = 'locomo-dialog-conv-t1'"
                            ).fetchone()[0] == 6


def second(sample: dict) -> dict:
    """The same conversation as another one (its own project), so folds have a conversation to hold out."""
    return {**sample, "sample_id": "conv-t2"}


def test_settings_become_keyword_options_of_recall_or_bad_input_naming_the_field():
    assert locomo.recall_settings(["kinds=note,gotcha", "types=semantic"]) == {"kinds": ["note", "gotcha"],
                                                                                "types": ["semantic"]}
    for bad, field in ((["bogus=1"], "setting"), (["k=5"], "setting"), (["kinds"], "setting")):
        with pytest.raises(ValidationError) as error:
            locomo.recall_settings(bad)
        assert error.value.field == field, bad
    assert locomo.setting_value("prf", "on", bool | None) is True
    assert locomo.setting_value("prf", "off", bool | None) is False
    assert locomo.setting_value("prf", "none", bool | None) is None
    assert locomo.setting_value("depth", "3", int | None) == 3
    assert locomo.setting_value("share", "0.25", float) == 0.25
    for raw, hint in (("maybe", bool | None), ("3.5", int), ("many", float), ("none", bool)):
        with pytest.raises(ValidationError) as error:
            locomo.setting_value("prf", raw, hint)
        assert error.value.field == "prf", raw


def test_folds_score_offline_exactly_what_recall_ranks(mem, tmp_path, monkeypatch):
    monkeypatch.setenv(V.FUSION_WEIGHTS_ENV, "off")  # the in-sample figures of the hand-set formula
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([SAMPLE, second(SAMPLE)]))
    report = locomo.run(mem, data, "dialog", [1, 5], "hybrid", side_by_side=False, log=lambda m: None,
                        with_folds=True)
    assert report["recall_at"]["5"] == 1.0 and report["fusion"] == "handset"  # the existing keys stay
    folds_ = report["out_of_fold"]
    assert folds_["handset"]["recall_at"] == report["recall_at"]  # offline re-scoring = what recall served
    assert folds_["handset"]["per_category"] == report["per_category"]
    assert set(folds_["per_conversation"]) == {"conv-t1", "conv-t2"}
    assert set(folds_["learned"]["per_category"]) == {"single_hop", "multi_hop"}
    qs, _ = locomo.asked_questions(json.loads(data.read_text()), "dialog")
    asked = locomo.collect(mem, qs, "dialog", log=lambda m: None)
    model = folds.fit(asked, folds.FEATURES)
    for q, a in zip(qs, asked, strict=True):
        for ranker, scores in ((None, a.handset), (model, folds.model_scores(model, [a])[0])):
            with learned.using(ranker):
                online = [h.unit_id for h in mem.recall(q.project, q.text, k=V.RECALL_MAX_K, as_of=q.as_of)]
            assert online == [a.ids[i] for i in folds.ranking(scores, a.numbers)], (q.text, ranker)
    assert any(a.labels.any() and not a.labels.all() for a in asked)


def test_fit_fusion_on_another_model_writes_weights_recall_reads(mem, tmp_path, monkeypatch):
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([SAMPLE, second(SAMPLE)]))
    out = tmp_path / "weights.json"
    fitted = locomo.fit_fusion(mem, data, [1, 5, 10], out, model="minilm-l6@gt0.1-t2", force=True,
                               command="test", log=lambda m: None)
    assert fitted["written"] == str(out) and mem.serving_model() == "minilm-l6@gt0.1-t2"
    model, note = learned.load(out)
    assert model is not None and note is None
    assert model.meta["command"] == "test" and model.meta["data"]["questions"] == 12
    assert set(model.meta["figures"]) == {"dialog", "observation"}
    for units, report in fitted["reports"].items():
        assert report["fusion"].startswith("learned") and report["serving_model"] == "minilm-l6@gt0.1-t2"
        assert report["out_of_fold"]["learned_in_sample"]["recall_at"] == report["recall_at"], units
    with mem.connection() as conn:
        assert conn.execute("SELECT count(*) FROM memory_embeddings WHERE model_key = 'minilm-l6@gt0.1-t2'"
                            ).fetchone()[0] == 12 + 6  # dialog turns of both, their observations
    assert len({r["ingest"]["model"]["run_id"] for r in fitted["reports"].values()}) == 1  # one backfill for both
    monkeypatch.setenv(V.FUSION_WEIGHTS_ENV, str(out))
    question = locomo.questions(SAMPLE, "dialog")[0][0]
    hits = mem.recall(question.project, question.text, k=3, as_of=question.as_of)
    assert len(hits) == 3 and all(0 <= h.score <= 1 for h in hits) and hits[0].score >= hits[2].score
