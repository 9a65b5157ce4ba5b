"""Cues a query carries: named days and months as time windows."""

from datetime import UTC, datetime

from memory_assets.recall import cues


def note(mem, project, title, body, **kw):
    return mem.remember(project=project, kind="note", type="semantic", title=title, body=body, **kw)


def test_time_windows_read_named_days_and_months():
    utc = UTC
    assert cues.time_windows("What did Maria plan on the evening of 7 July, 2023?") == [
        (datetime(2023, 7, 6, tzinfo=utc), datetime(2023, 7, 9, tzinfo=utc))]
    assert cues.time_windows("the week before August 3, 2023") == [
        (datetime(2023, 8, 2, tzinfo=utc), datetime(2023, 8, 5, tzinfo=utc))]
    assert cues.time_windows("which class did she start in December 2023") == [
        (datetime(2023, 12, 1, tzinfo=utc), datetime(2024, 1, 1, tzinfo=utc))]
    assert cues.time_windows("in 2023, may we deploy on 31 February, 2024?") == []
