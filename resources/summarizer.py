"""An optional LLM summariser for consolidation; off by default (extractive summaries need no model)."""

import dagster as dg


class SummarizerResource(dg.ConfigurableResource):
    """When enabled by a deployment that has an LLM, returns a callable (member texts) -> (title, body)."""

    enabled: bool = False

    def summarizer(self):
        return None  # a deployment with an LLM client returns its summarise function here
