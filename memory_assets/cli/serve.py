"""Serving agents over MCP: the stdio server (its SDK loads only for this command)."""

from __future__ import annotations

import click

from memory_assets import authz, mcp_server
from memory_assets import vocabulary as V


@click.command()
@click.option("--operator", help=f"Serve the forget tool as this operator (one listed in {V.OPERATORS_ENV}).")
def mcp(operator: str | None) -> None:
    """Serve the MCP tools (remember, recall, confirm, flag, cite; forget with --operator) over stdio."""
    if operator is not None:
        authz.require_operator(operator)  # refused (exit 2) before the server starts
    mcp_server.main(operator)
