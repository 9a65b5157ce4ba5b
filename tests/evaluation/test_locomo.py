"""The LoCoMo evaluation end to end on a small conversation of the same shape: ingest, ask, score, report."""

import json

from memory_assets.evaluation import locomo

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
