"""Adding the context-aware model (c1) as an operator would: a new model partition of unit_embeddings backfilled
over every day in one run, checked, switched to serving; recall serves t1's vectors before and c1's after."""

from datetime import UTC, datetime, timedelta

import dagster as dg
import numpy as np

from memory_assets import embeddings
from memory_assets.definitions import defs
from memory_assets.defs.embeddings.assets import unit_embeddings
from tests.cases import T1

C1 = "minilm-l6@gt0.1-c1"
CONVERSATION = [  # three sessions, one a day, two speakers
    [("Caroline", "How was the pottery class yesterday?"),
     ("Melanie", "Wonderful, I made a blue bowl for the kids."),
     ("Caroline", "Lovely! Did they like it?")],
    [("Melanie", "We went camping at the lake last weekend."),
     ("Caroline", "Did you see the meteor shower?"),
     ("Melanie", "Yes, the kids counted twenty of them.")],
    [("Caroline", "I started volunteering at the youth centre."),
     ("Melanie", "What do you do there?"),
     ("Caroline", "I mentor teenagers who just came out.")],
]


def run(instance, **kwargs):
    definitions = defs()
    everything = list(definitions.assets) + list(definitions.asset_checks)
    selection = dg.AssetSelection.assets(unit_embeddings) | dg.AssetSelection.checks_for_assets(unit_embeddings)
    return dg.materialize(everything, selection=selection, instance=instance, resources=definitions.resources, **kwargs)


def seed_conversation(mem, conn, today):
    days = [today - timedelta(days=2 - i) for i in range(len(CONVERSATION))]
    for number, (day, session) in enumerate(zip(days, CONVERSATION, strict=True), start=1):
        for i, (speaker, text) in enumerate(session):
            token = mem.remember(project="chat", kind="note", type="episodic", title=text, body=text,
                                 persona=speaker, session_id=f"session-{number}", task_id=f"{number}:{i}",
                                 confidence=0.9).token
            conn.execute("UPDATE memory_units SET created_at = %s WHERE number = %s",
                         (datetime.combine(day, datetime.min.time(), tzinfo=UTC) + timedelta(hours=3 + i),
                          int(token[4:])))
    return days


def dense_of_top_hit(mem, conn, query):
    """The top hit's dense component, and the cosines of the query with that unit's t1 and c1 vectors."""
    hit = mem.recall("chat", query, k=3, legs="dense")[0]
    stored = dict(conn.execute("SELECT model_key, embedding FROM memory_embeddings WHERE unit_id = %s",
                               (hit.unit_id,)).fetchall())
    vector = embeddings.encode_query(T1, query)
    return hit.components["dense"], {m: float(np.dot(vector, v.to_numpy())) for m, v in stored.items()}


def test_c1_is_backfilled_over_all_days_in_one_run_checked_and_switched_to_serving(mem, conn, today):
    days = seed_conversation(mem, conn, today)
    instance = dg.DagsterInstance.ephemeral()
    for day in days:
        run(instance, partition_key=f"{day.isoformat()}|{T1}")
    query = "What did Melanie make in the pottery class?"
    served, cosines = dense_of_top_hit(mem, conn, query)
    assert set(cosines) == {T1} and abs(served - cosines[T1]) < 1e-3  # t1 serves; c1 has no vector yet

    backfill = run(instance, tags={"dagster/asset_partition_range_start": f"{days[0].isoformat()}|{C1}",
                                   "dagster/asset_partition_range_end": f"{days[-1].isoformat()}|{C1}"})
    assert backfill.success  # one run over the three day partitions of the new model
    metadata = backfill.get_asset_materialization_events()[0].materialization.metadata
    assert (metadata["partitions"].value, metadata["written"].value) == (3, 9)
    assert mem.embedding_coverage(C1)["missing"] == 0  # what the operator reads before switching

    served, cosines = dense_of_top_hit(mem, conn, query)
    assert abs(served - cosines[T1]) < 1e-3 and abs(cosines[C1] - cosines[T1]) > 1e-3  # still t1 until the switch

    mem.set_serving_model(C1)
    check = {e.check_name: e for e in run(instance, partition_key=f"{days[-1].isoformat()}|{C1}")
             .get_asset_check_evaluations()}["embeddings_current"]
    assert check.passed and check.metadata["missing"].value == 0
    served, cosines = dense_of_top_hit(mem, conn, query)
    assert abs(served - cosines[C1]) < 1e-3  # recall now serves the context-aware vectors

    # the reply carries the question it answers: with c1 it is the nearest turn to a question about the class
    hits = [h.body for h in mem.recall("chat", query, k=3, legs="dense")]
    assert hits[0] == "Wonderful, I made a blue bowl for the kids."
