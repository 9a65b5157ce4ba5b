"""memory-assets: long-term memory for AI agents as a Dagster asset graph on PostgreSQL + pgvector."""

from memory_assets.api import Memory, connect
from memory_assets.errors import ScopeError, ValidationError
from memory_assets.ledger.capture import RememberResult

__all__ = ["Memory", "RememberResult", "ScopeError", "ValidationError", "connect"]
