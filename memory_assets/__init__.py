"""memory-assets: long-term memory for AI agents as a Dagster asset graph on PostgreSQL + pgvector."""

from memory_assets.api import Memory, connect
from memory_assets.gates import ValidationError
from memory_assets.ledger import RememberResult

__all__ = ["Memory", "RememberResult", "ValidationError", "connect"]
