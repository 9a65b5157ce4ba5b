"""Dagster resources: the memory database (embedded or DATABASE_URL), embedding models, optional reranker and LLM."""

from resources.embedder import EmbedderResource, RerankerResource
from resources.postgres import PostgresResource
from resources.summarizer import SummarizerResource

__all__ = ["EmbedderResource", "PostgresResource", "RerankerResource", "SummarizerResource"]
