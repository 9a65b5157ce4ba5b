"""The dense leg's neighbouring turns worked out from the details of every unit (legs.neighbours), beside what
recall/candidates' `near` gives (tests/recall/test_search.py compares the two statements' candidates)."""

from memory_assets import vocabulary as V
from memory_assets.recall.fusion import Details
from memory_assets.recall.legs import neighbours


def unit(number: int, episodic: bool = True) -> dict:
    return {"number": number, "episodic": episodic}


def test_the_dense_seeds_neighbours_are_the_episodic_turns_within_the_window(monkeypatch):
    """Only an episodic seed among the leg's top CONTEXT_SEED_RANK brings neighbours, and only the episodic units
    numbered within CONTEXT_WINDOW of it (itself excluded), each with its distance in turns; a number no detailed
    unit holds (a turn the reader may not see, or the filters leave out) is no one's neighbour."""
    monkeypatch.setattr(V, "CONTEXT_WINDOW", 2)
    monkeypatch.setattr(V, "CONTEXT_SEED_RANK", 3)
    details = {"a": unit(10), "b": unit(11), "c": unit(12, episodic=False), "d": unit(13), "f": unit(8),
               "g": unit(20), "h": unit(21), "i": unit(30), "j": unit(31)}  # 9 is not detailed
    dense = [("b", 0.1, True), ("c", 0.2, False), ("g", 0.3, True), ("i", 0.4, True)]  # i: past the seed rank
    assert sorted(neighbours(dense, Details.of(details))) == [
        ("b", "a", 1), ("b", "d", 2), ("g", "h", 1)]
    wider = {**details, "x": unit(14)}
    assert ("b", "x", 3) not in neighbours(dense, Details.of(wider))  # past the window
    assert neighbours([("c", 0.2, False)], Details.of(details)) == []
