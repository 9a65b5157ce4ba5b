"""Dagster resources: the memory database (embedded or DATABASE_URL), embedding models, optional reranker and LLM."""

from memory_assets.resources.embedder import EmbedderResource, RerankerResource
from memory_assets.resources.postgres import PostgresResource
from memory_assets.resources.summarizer import SummarizerResource

__all__ = ["EmbedderResource", "PostgresResource", "RerankerResource", "SummarizerResource"]
