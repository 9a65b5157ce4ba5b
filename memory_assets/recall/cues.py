"""Cues a query carries beyond its words: the days and months it names, and the personas it mentions."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from memory_assets import vocabulary as V

MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
          "november", "december")
MONTH = "(?P<month>" + "|".join(MONTHS) + ")"
NAMED_DAY = re.compile(  # '7 July, 2023' or 'July 7, 2023'
    rf"\b(?:(?P<d1>\d{{1,2}})\s+{MONTH}|(?P<m2>{'|'.join(MONTHS)})\s+(?P<d2>\d{{1,2}})),?\s+(?P<year>\d{{4}})\b",
    re.IGNORECASE)
NAMED_MONTH = re.compile(rf"\b{MONTH},?\s+(?P<year>\d{{4}})\b", re.IGNORECASE)
WORD = re.compile(r"[A-Za-z0-9]+")


def time_windows(query: str) -> list[tuple[datetime, datetime]]:
    """The days and months a query names ('on 7 July, 2023', 'May 3, 2023', 'in December 2023') as time windows."""
    windows = []
    for match in NAMED_DAY.finditer(query):
        month = MONTHS.index((match["month"] or match["m2"]).lower()) + 1
        try:
            day = datetime(int(match["year"]), month, int(match["d1"] or match["d2"]), tzinfo=UTC)
        except ValueError:  # 31 February: not a date, not a cue
            continue
        slack = timedelta(days=V.TIME_CUE_DAY_SLACK_DAYS)
        windows.append((day - slack, day + timedelta(days=1) + slack))
    for match in NAMED_MONTH.finditer(NAMED_DAY.sub(" ", query)):
        month, year = MONTHS.index(match["month"].lower()) + 1, int(match["year"])
        windows.append((datetime(year, month, 1, tzinfo=UTC),
                        datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC)))
    return windows


def named_words(query: str) -> set[str]:
    """The query's words in lower case: a persona whose name is among them is named by the query."""
    return {w.lower() for w in WORD.findall(query)}
