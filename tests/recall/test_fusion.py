"""Fusion and scoring as pure functions: no database, no model, just the arithmetic recall ranks by."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from memory_assets import vocabulary as V
from memory_assets.recall import expansion, fusion
from memory_assets.recall.legs import Candidates

AT = datetime(2024, 6, 1, tzinfo=UTC)


def details(**units: dict) -> fusion.Details:
    """Scoring details per unit id with neutral defaults."""
    base = {"number": 1, "importance": 0.5, "trust": 0.5, "valid_from": AT, "personas": None, "session_id": None,
            "recency": 1.0}
    return fusion.Details.of({unit_id: {**base, **fields} for unit_id, fields in units.items()})


def test_a_unit_first_in_both_legs_scores_one():
    fused = fusion.fuse([("a", 0.1, False), ("b", 0.4, False)], [("a", 7.0, False), ("c", 2.0, False)], (1.0, 1.0))
    assert fused["a"]["relevance"] == pytest.approx(1.0)
    assert fused["b"]["sparse"] is None and fused["c"]["dense"] is None
    assert fused["a"]["dense"] == pytest.approx(0.9)  # similarity = 1 - cosine distance
    assert fused["b"]["relevance"] < 1.0 and fused["c"]["relevance"] < 1.0


def test_an_empty_leg_takes_no_weight():
    """With no sparse rows the dense leg alone decides, and its best row still scores 1."""
    fused = fusion.fuse([("a", 0.2, False), ("b", 0.5, False)], [], (1.0, 1.3))
    assert fused["a"]["relevance"] == pytest.approx(1.0)
    assert fusion.fuse([], [], (1.0, 1.0)) == {}


def test_rrf_share_mixes_rank_and_score():
    """Two dense rows with nearly equal distances: the score part barely separates them, RRF does."""
    fused = fusion.fuse([("a", 0.30, False), ("b", 0.31, False), ("c", 0.9, False)], [], (1.0, 0.0))
    rrf_gap = fused["a"]["rrf"] - fused["b"]["rrf"]
    assert rrf_gap == pytest.approx((1 / (V.RRF_K + 1) - 1 / (V.RRF_K + 2)) / (1 / (V.RRF_K + 1)))
    assert fused["a"]["relevance"] > fused["b"]["relevance"] > fused["c"]["relevance"]


def test_seeds_are_the_best_episodic_candidates():
    fused = fusion.Pool.of({u: {"relevance": r} for u, r in (("a", 0.9), ("b", 0.8), ("c", 0.7))})
    assert fusion.seeds(fused, {"a", "c"}) == ["a", "c"]


def test_neighbours_share_relevance_falling_with_distance():
    fused = fusion.Pool.of({"seed": {"relevance": 1.0, "dense": None, "sparse": None, "rrf": 0.0, "scores": 0.0}})
    fusion.spread_to_neighbours(fused, [("seed", "next", 1), ("seed", "far", 2)])
    assert fused["next"]["context"] == pytest.approx(V.CONTEXT_WEIGHT)
    assert fused["far"]["context"] == pytest.approx(V.CONTEXT_WEIGHT / 2)
    assert fused["seed"]["relevance"] == 1.0  # a seed is not lifted by its own neighbours


def test_a_session_lifts_its_other_units_by_its_best():
    fused = fusion.Pool.of({"a": {"relevance": 1.0}, "b": {"relevance": 0.1}, "c": {"relevance": 0.5}})
    scoring = details(a={"session_id": "s1"}, b={"session_id": "s1"}, c={"session_id": "s2"})
    fusion.lift_sessions(fused, scoring)
    assert fused["b"]["session"] == pytest.approx(V.SESSION_WEIGHT)
    assert fused["c"]["session"] == pytest.approx(V.SESSION_WEIGHT * 0.5)


def test_persona_and_date_cues_multiply_relevance_and_scores_stay_within_one():
    fused = fusion.Pool.of({u: {"relevance": 1.0} for u in ("named", "dated", "plain")})
    scoring = details(named={"personas": ["maria"]}, dated={"valid_from": datetime(2023, 7, 7, 12, tzinfo=UTC)},
                      plain={})
    fusion.score(fused, scoring, "What did Maria plan on 7 July, 2023?", AT)
    assert fused["named"]["persona"] == V.PERSONA_BOOST and "time" not in fused["named"]
    assert fused["dated"]["time"] == V.TIME_CUE_BOOST and "persona" not in fused["dated"]
    assert fused["dated"]["relevance"] > fused["named"]["relevance"] > fused["plain"]["relevance"]
    assert all(0 < e["score"] <= 1 for e in fused.values())


def test_a_time_cue_marks_its_window_to_the_microsecond_and_recency_reads_the_same_seconds():
    """A named month is [its first day, the next month's): a unit from its first microsecond or its last is dated,
    one a microsecond before or at the next month's start is not; recency over the column is recency() exactly."""
    start, end, one = datetime(2023, 7, 1, tzinfo=UTC), datetime(2023, 8, 1, tzinfo=UTC), timedelta(microseconds=1)
    times = {"first": start, "last": end - one, "before": start - one, "after": end, "odd": start + 7 * one}
    fused = fusion.Pool.of({u: {"relevance": 1.0} for u in times})
    scoring = details(**{u: {"valid_from": t, "recency": None} for u, t in times.items()})
    fusion.score(fused, scoring, "What happened in July 2023?", AT)
    assert {u for u in times if "time" in fused[u]} == {"first", "last", "odd"}
    assert all(fused[u]["recency"] == fusion.recency(t, AT) for u, t in times.items())
    assert scoring["odd"]["valid_from"] == times["odd"] and fusion.micros(times["odd"]) % 1_000_000 == 7
    late = datetime(2400, 1, 1, 0, 0, 0, 1, tzinfo=UTC)  # ~300-430 years after: past 2**53 microseconds apart
    rng = random.Random(5)  # (a float64 of the microseconds would round twice for 7 of these 40, to the last bit)
    starts = {f"u{i}": datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=rng.randrange(4 * 10**15))
              for i in range(40)}
    far = fusion.Pool.of({u: {"relevance": 1.0} for u in starts})
    fusion.score(far, details(**{u: {"valid_from": t, "recency": None} for u, t in starts.items()}), "words", late)
    assert all(far[u]["recency"] == fusion.recency(t, late) for u, t in starts.items())


def test_details_joined_keep_both_and_take_only_the_units_not_there():
    """Details joined are a new set: the first's units as they were, the second's others after them (legs.merged
    joins the dense statement's first, so a unit both read is as the later statement read it); extend (a query-side
    round's units) takes them in place."""
    first = details(a={"number": 1, "session_id": "s1", "episodic": True}, b={"number": 2, "personas": ["ana", "mel"]})
    second = details(b={"number": 2, "importance": 0.9, "personas": ["ana"]},
                     c={"number": 3, "sessions": ["s1", "s2"], "episodic": True})
    assert first.turns == {1: "a"}  # worked out once, then again after an extend below
    both = first.joined(second)
    assert list(both) == ["a", "b", "c"] and list(first) == ["a", "b"] and list(second) == ["b", "c"]
    assert {u: both[u] for u in first} == dict(first.items()) and both["c"] == second["c"]  # b as the first had it
    assert both["a"]["sessions"] == ["s1"] and both["c"]["sessions"] == ["s1", "s2"] and both["a"]["personas"] is None
    first.extend(second)
    assert dict(first.items()) == dict(both.items()) and first.turns == both.turns == {1: "a", 3: "c"}


def test_the_final_score_follows_the_design_formula():
    fused = fusion.Pool.of({"a": {"relevance": 1.0}})
    fusion.score(fused, details(a={"importance": 0.8, "recency": 0.5}), "plain words", AT)
    relevance = 1.0 / fusion.max_relevance(False, False)
    assert fused["a"]["score"] == pytest.approx(relevance * (0.7 + 0.2 * 0.8 + 0.1 * 0.5))


def test_recency_halves_every_half_life_and_never_exceeds_one():
    assert fusion.recency(AT, AT) == 1.0
    assert fusion.recency(AT - timedelta(days=V.RECENCY_HALF_LIFE_DAYS), AT) == pytest.approx(0.5)
    assert fusion.recency(AT + timedelta(days=3), AT) == 1.0  # valid from the future counts as now


def test_ranking_breaks_ties_by_unit_number():
    fused = fusion.Pool.of({"late": {"score": 0.5}, "early": {"score": 0.5}, "best": {"score": 0.9}})
    scoring = details(late={"number": 9}, early={"number": 2}, best={"number": 5})
    assert fusion.ranked(fused, scoring, 2) == ["best", "early"]


def test_a_turn_neither_leg_found_joins_the_pool_through_its_neighbour_at_zero():
    """The spread adds a unit the legs missed: no leg's value, no rank or score parts, its context its relevance."""
    fused = fusion.fuse([("seed", 0.1, True), ("other", 0.3, True)], [], (1.0, 1.3))
    fusion.spread_to_neighbours(fused, [("seed", "next", 1)])
    assert list(fused) == ["seed", "other", "next"] and "context" not in fused["seed"]
    assert fused["next"] == {"dense": None, "sparse": None, "rrf": 0.0, "scores": 0.0,
                             "relevance": pytest.approx(V.CONTEXT_WEIGHT), "context": pytest.approx(V.CONTEXT_WEIGHT)}


def test_a_copy_keeps_its_components_while_the_pool_it_came_from_is_scored():
    fused = fusion.fuse([("a", 0.1, True)], [("b", 3.0, True)], (1.0, 1.3))
    before, first = fused["a"], fused.copy()
    fusion.score(first, details(a={}, b={"number": 2}), "plain words", AT)
    assert "score" in first["a"] and first["a"]["relevance"] < before["relevance"] and fused["a"] == before


def test_every_units_score_and_rank_follow_its_own_components():
    """Over a pool of hundreds, each unit's columns give its own formula's score, and the ranking is by score then
    unit number, as one unit at a time would compute them."""
    rng = random.Random(7)
    ids = [f"u{i}" for i in range(400)]
    dense = [(u, rng.uniform(0.2, 0.9), True) for u in rng.sample(ids, 250)]
    sparse = [(u, rng.choice((0.5, 1.0, 2.5)), True) for u in rng.sample(ids, 200)]  # ties, as idf sums give
    dense.sort(key=lambda row: row[1])
    sparse.sort(key=lambda row: -row[1])
    scoring = details(**{u: {"number": i + 1, "importance": rng.random(), "session_id": f"s{i % 9}",
                             "sessions": [f"s{i % 9}"], "recency": None if i % 3 else rng.random(),
                             "valid_from": AT - timedelta(days=i)} for i, u in enumerate(ids)})
    fused = fusion.fuse(dense, sparse, (V.DENSE_WEIGHT, V.SPARSE_WEIGHT))
    fusion.spread_to_neighbours(fused, [(dense[0][0], u, 1) for u in rng.sample(ids, 30)])
    fusion.lift_sessions(fused, scoring)
    fusion.score(fused, scoring, "plain words", AT)
    for unit_id, entry in fused.items():
        unit = scoring[unit_id]
        fresh = fusion.recency(unit["valid_from"], AT) if unit["recency"] is None else unit["recency"]
        assert entry["recency"] == fresh and entry["importance"] == unit["importance"]
        assert entry["score"] == entry["relevance"] * (0.7 + 0.2 * unit["importance"] + 0.1 * fresh)
    best = sorted(fused, key=lambda u: (-fused[u]["score"], scoring[u]["number"]))
    assert fusion.ranked(fused, scoring, 50) == best[:50] and len(fused) > 300


def one_unit_at_a_time(dense, sparse, weights, neighbours, sessions):
    """Fusion, the neighbours' share and the sessions' lift as their formulas read, one unit at a time in plain
    Python: what the pool's columns must give to the bit."""
    wd, ws = (weights[0] if dense else 0.0), (weights[1] if sparse else 0.0)
    units: dict[str, dict] = {}
    for leg, rows, weight in (("dense", dense, wd), ("sparse", sparse, ws)):
        values = [1.0 - row[1] if leg == "dense" else row[1] for row in rows]
        for rank, (row, value) in enumerate(zip(rows, values, strict=True), start=1):
            unit = units.setdefault(row[0], {"rrf": 0.0, "scores": 0.0})
            unit["rrf"] += weight / (V.RRF_K + rank)
            low, high = min(values), max(values)
            unit["scores"] += weight * ((value - low) / (high - low) if high > low else 1.0)
    for unit in units.values():
        unit["rrf"] /= (wd + ws) / (V.RRF_K + 1)
        unit["scores"] /= wd + ws
        unit["relevance"] = V.RRF_SHARE * unit["rrf"] + (1 - V.RRF_SHARE) * unit["scores"]
    shares: dict[str, float] = {}
    for seed, turn, distance in neighbours:
        shares[turn] = max(shares.get(turn, 0.0), V.CONTEXT_WEIGHT * units[seed]["relevance"] / distance)
    for turn, share in shares.items():
        units.setdefault(turn, {"rrf": 0.0, "scores": 0.0, "relevance": 0.0})["relevance"] += share
    best = {}
    for unit_id, unit in units.items():
        best[sessions[unit_id]] = max(best.get(sessions[unit_id], -1.0), unit["relevance"])
    for unit_id, unit in units.items():
        unit["relevance"] += V.SESSION_WEIGHT * best[sessions[unit_id]] / max(best.values())
    return units


def test_the_columns_give_each_unit_its_formula_to_the_bit():
    rng = random.Random(11)
    ids = [f"u{i}" for i in range(300)]
    dense = sorted(((u, rng.uniform(0.1, 0.9), True) for u in rng.sample(ids[:250], 200)), key=lambda row: row[1])
    sparse = sorted(((u, rng.choice((0.7, 1.4, 3.2)) + rng.random(), True) for u in rng.sample(ids, 150)),
                    key=lambda row: -row[1])
    neighbours = [(rng.choice(dense[:30])[0], rng.choice(ids), rng.choice((1, 2))) for _ in range(60)]
    sessions = {u: f"s{rng.randrange(12)}" for u in ids}
    fused = fusion.fuse(dense, sparse, (V.DENSE_WEIGHT, V.SPARSE_WEIGHT))
    fusion.spread_to_neighbours(fused, neighbours)
    fusion.lift_sessions(fused, details(**{u: {"session_id": s} for u, s in sessions.items()}))
    expected = one_unit_at_a_time(dense, sparse, (V.DENSE_WEIGHT, V.SPARSE_WEIGHT), neighbours, sessions)
    assert set(fused) == set(expected) and len(fused) > len({row[0] for row in dense + sparse})
    assert {u: (e["rrf"], e["scores"], e["relevance"]) for u, e in fused.items()} == {
        u: (e["rrf"], e["scores"], e["relevance"]) for u, e in expected.items()}


def test_an_extra_rounds_units_join_the_pool_and_every_unit_carries_its_component():
    """expansion.mix: the first round's relevance scaled by what the rounds leave it, each round's added by its
    weight; a unit only the round found joins at 0 in the first round's parts, and a unit the spread adds after the
    mix carries no round's component."""
    fused = fusion.fuse([("a", 0.1, True), ("b", 0.3, True)], [], (1.0, 1.3))
    before = {u: fused[u]["relevance"] for u in fused}
    theirs = fusion.fuse([], [("b", 2.0, True), ("z", 1.0, True)], (1.0, 1.3))
    found = Candidates("m", 3, [], [("b", 2.0, True), ("z", 1.0, True)], [("z", "y", 1)], details(z={"number": 3}),
                       0, False, False, None)
    scoring, near, episodic = details(a={}, b={"number": 2}), [], set()
    expansion.mix(fused, scoring, near, episodic, [expansion.Round("prf", found, theirs, 0.25)])
    assert fused["a"]["relevance"] == 0.75 * before["a"] and fused["a"]["prf"] == 0.0
    assert fused["b"]["relevance"] == 0.75 * before["b"] + 0.25 * theirs["b"]["relevance"]
    assert fused["z"] == {"dense": None, "sparse": None, "rrf": 0.0, "scores": 0.0,
                          "relevance": 0.25 * theirs["z"]["relevance"], "prf": theirs["z"]["relevance"]}
    assert "z" in scoring and near == [("z", "y", 1)] and episodic == {"b", "z"}
    fusion.spread_to_neighbours(fused, [("z", "y", 1)])
    assert "prf" not in fused["y"] and fused["y"]["context"] == V.CONTEXT_WEIGHT * fused["z"]["relevance"]
