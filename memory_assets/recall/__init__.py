"""Hybrid recall: dense (pgvector, serving model) and full-text legs, filtered before LIMIT, fused, scored, cited.

request (validation, terms, shared parameters), legs (the SQL), fusion (pure scoring), cues (dates, personas),
search (the orchestrator).
"""

from memory_assets.recall.search import Hit, QueryEncoder, RecallResult, recall

__all__ = ["Hit", "QueryEncoder", "RecallResult", "recall"]
