"""The embedding models as a Dagster resource: batch size and thread count are operator settings."""

import dagster as dg

from memory_assets import embeddings
from memory_assets import vocabulary as V
from memory_assets.curation import Agreement
from memory_assets.recall import rerank as cross_encoder


class EmbedderResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """sentence-transformers models from locally installed wheels (offline); one load per process."""

    batch_size: int = V.EMBED_BATCH_SIZE
    threads: int = V.EMBED_THREADS

    def embedder(self, model_key: str) -> embeddings.Embedder:
        """The loaded model behind a model key, with this deployment's batch size and threads."""
        return embeddings.embedder_for(model_key, batch_size=self.batch_size, threads=self.threads)


class RerankerResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """The optional cross-encoder: recall's rerank stage and, when enabled, the merge-agreement hook. Its weights
    are a local sentence-transformers CrossEncoder folder (`path`, else RERANKER_PATH_ENV); none ship offline."""

    enabled: bool = False
    path: str | None = None
    agreement_min: float = 0.5  # a cross-encoder score from which two texts count as stating the same fact

    def reranker(self) -> cross_encoder.Reranker | None:
        """The cross-encoder at the configured folder; None where no weights are installed."""
        return cross_encoder.configured(self.path)

    def agreement(self) -> Agreement | None:
        """Whether two texts state the same fact; None unless enabled with weights installed (merges then rest on
        cosine alone)."""
        scorer = self.reranker() if self.enabled else None
        if scorer is None:
            return None
        threshold = self.agreement_min
        return lambda text_a, text_b: scorer(text_a, [text_b])[0] >= threshold
