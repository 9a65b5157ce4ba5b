-- Whether the kill switch is on.
SELECT {events/_killed};
