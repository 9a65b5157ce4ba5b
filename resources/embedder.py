"""The embedding models as a Dagster resource: batch size and thread count are operator settings."""

import dagster as dg

from memory_assets import embeddings
from memory_assets import vocabulary as V
from memory_assets.curation import Agreement


class EmbedderResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """sentence-transformers models from locally installed wheels (offline); one load per process."""

    batch_size: int = V.EMBED_BATCH_SIZE
    threads: int = V.EMBED_THREADS

    def embedder(self, model_key: str) -> embeddings.Embedder:
        """The loaded model behind a model key, with this deployment's batch size and threads."""
        return embeddings.embedder_for(model_key, batch_size=self.batch_size, threads=self.threads)


class RerankerResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """Optional agreement hook for merges; off by default (no cross-encoder weights ship offline)."""

    enabled: bool = False

    def agreement(self) -> Agreement | None:
        """Whether two texts state the same fact; None where no cross-encoder weights are installed."""
        return None  # a deployment with cross-encoder weights returns a callable (text_a, text_b) -> bool here
