"""Binds the resources every asset and check uses."""

import dagster as dg

from memory_assets import vocabulary as V
from memory_assets.resources import EmbedderResource, PostgresResource, RerankerResource, SummarizerResource


@dg.definitions
def resources() -> dg.Definitions:
    return dg.Definitions(
        resources={
            "postgres": PostgresResource(
                database_url=dg.EnvVar(V.DATABASE_URL_ENV).get_value(),
                home=dg.EnvVar(V.HOME_ENV).get_value(),
            ),
            "embedder": EmbedderResource(),
            "reranker": RerankerResource(),
            "summarizer": SummarizerResource(),
        }
    )
