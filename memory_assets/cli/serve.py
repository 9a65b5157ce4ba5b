"""Serving agents over MCP: the stdio server (its SDK loads only for this command)."""

from __future__ import annotations

import click

from memory_assets import mcp_server


@click.command()
def mcp() -> None:
    """Serve the MCP tools (remember, recall, forget, confirm, flag, cite) over stdio."""
    mcp_server.main()
