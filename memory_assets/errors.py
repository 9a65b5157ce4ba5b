"""The two errors callers act on: bad input (names the field and the limit) and a missing scope."""

from __future__ import annotations


class ValidationError(ValueError):
    """Bad input: names the field and the limit it broke."""

    def __init__(self, field_name: str, message: str):
        self.field = field_name
        super().__init__(f"{field_name}: {message}")


class ScopeError(PermissionError):
    """The actor lacks the scope (read, write, forget) a request needs on a project."""
