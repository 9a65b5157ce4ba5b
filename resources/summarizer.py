"""An optional LLM summariser for consolidation; off by default (extractive summaries need no model)."""

import dagster as dg

from memory_assets.consolidation import Summarizer


class SummarizerResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """When enabled by a deployment that has an LLM, returns a callable (member texts) -> (title, body)."""

    enabled: bool = False

    def summarizer(self) -> Summarizer | None:
        """The summarise function of a deployment's LLM; None keeps consolidation extractive."""
        return None  # a deployment with an LLM client returns its summarise function here
