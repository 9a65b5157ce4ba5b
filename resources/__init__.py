"""Dagster resources: the memory database (embedded or DATABASE_URL)."""

from resources.postgres import PostgresResource

__all__ = ["PostgresResource"]
