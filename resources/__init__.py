"""Dagster resources: the memory database (embedded or DATABASE_URL) and the embedding models."""

from resources.embedder import EmbedderResource, RerankerResource
from resources.postgres import PostgresResource

__all__ = ["EmbedderResource", "PostgresResource", "RerankerResource"]
