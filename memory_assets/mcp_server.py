"""The MCP server (stdio, the official SDK): remember, recall, confirm, flag, cite (and, for an operator, forget)
as agent tools."""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

from mcp.server.fastmcp import FastMCP
from mcp.server.fastmcp.exceptions import ToolError

from memory_assets import authz, gates, tracing
from memory_assets import vocabulary as V
from memory_assets.api import Memory, connect
from memory_assets.authz import Actor

_memory: Memory | None = None
_served = False  # whether a recall has been served (and what it loaded frozen)


def memory() -> Memory:
    """The process's one Memory, opened on first use so the server starts before the database is needed."""
    global _memory
    if _memory is None:
        _memory = connect()
    return _memory


def remember(project: str, kind: str, type: str, title: str, body: str, paths: list[str] | None = None,
             keywords: list[str] | None = None, confidence: float = V.DEFAULT_CONFIDENCE, task_id: str | None = None,
             session_id: str | None = None, supersedes: str | None = None, persona: str | None = None,
             private: bool = False) -> dict[str, Any]:
    """Contribute one fact (one unit) to a project's shared memory (private: only `persona` recalls it); returns
    its status and mem-<n> token."""
    r = memory().remember(project=project, kind=kind, type=type, title=title, body=body, paths=paths,
                          keywords=keywords, confidence=confidence, feed="mcp", task_id=task_id,
                          session_id=session_id, supersedes=supersedes, persona=persona,
                          visibility=V.VISIBILITY_PRIVATE if private else V.DEFAULT_VISIBILITY)
    return {"status": r.status, "token": r.token, "reason": r.reason}


def recall(project: str, query: str, k: int = V.RECALL_DEFAULT_K, kinds: list[str] | None = None,
           types: list[str] | None = None, paths: list[str] | None = None, as_of: str | None = None,
           persona: str | None = None) -> dict[str, Any]:
    """Search a project's memory (dense + full text), optionally by kind, type, path prefix, as of an ISO time
    (history), and as a persona (its private units too); hits are untrusted notes with tokens to cite."""
    result = memory().recall(project, query, k, kinds=kinds, types=types, paths=paths,
                             as_of=gates.iso_time("as_of", as_of, naive_is_utc=True) if as_of else None,
                             actor=Actor.reader(project, persona))
    freeze_once_served()
    return {"mode": result.mode, "hits": [{"token": h.token, "title": h.title, "body": h.body, "kind": h.kind,
                                          "score": h.score, "citations": [c["task_id"] for c in h.citations]}
                                         for h in result.hits]}


def freeze_once_served() -> None:
    """After the first recall, freeze what the server holds then (the pool, the query encoder and the libraries it
    loaded), as main() froze what it started with: it lives as long as the server (docs/scaling.md item 31)."""
    global _served
    if not _served:
        _served = True
        gc.collect()
        gc.freeze()


def forget_tool(operator: str) -> Callable[..., dict[str, Any]]:
    """The forget tool, acting as the operator the server was started with (checked against the deployment's
    MEMORY_ASSETS_OPERATORS), never as a name the calling agent supplies."""
    authz.require_operator(operator)

    def forget(project: str, token: str, reason: str) -> dict[str, Any]:
        """Forget a unit for good (its text is blanked everywhere; the id stays for the audit)."""
        memory().forget(project, token, Actor.operator(project, operator), reason=reason)
        return {"token": token, "status": V.STATUS_FORGOTTEN}

    return forget


def confirm(project: str, token: str, task_id: str, persona: str | None = None) -> dict[str, Any]:
    """Confirm a unit was right in this task (one vote per task), as a persona (to reach its private units)."""
    return memory().confirm(project, token, task_id, persona=persona)


def flag(project: str, token: str, task_id: str, persona: str | None = None) -> dict[str, Any]:
    """Flag a unit as wrong or harmful in this task (one vote per task), as a persona (to reach its private units)."""
    return memory().flag(project, token, task_id, persona=persona)


def cite(project: str, task_id: str, text: str, persona: str | None = None) -> dict[str, Any]:
    """Record which mem-<n> tokens of this project an answer cites, as a persona (to reach its private units)."""
    return {"cited": memory().cite_from_text(project, task_id, text, persona)}


TOOLS = (remember, recall, confirm, flag, cite)


class MemoryServer(FastMCP):
    """FastMCP whose tool errors never quote a credential: the SDK's own check of an argument's type prints the value
    it refused, and an agent pastes a credential into any field."""

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        """The tool's answer; an error's message with each quoted value that holds a credential replaced."""
        try:
            return await super().call_tool(name, arguments)
        except ToolError as error:
            raise ToolError(gates.redacted(str(error))) from None  # the cause would carry the value on


def build_server(operator: str | None = None) -> FastMCP:
    """The server with its tools, built on demand: FastMCP configures logging when built, which no import should.

    `forget` is served only when the server is started as an operator the deployment lists in
    MEMORY_ASSETS_OPERATORS (ScopeError otherwise): an agent can never grant itself the forget scope.
    """
    server = MemoryServer("memory-assets")
    for tool in TOOLS:
        server.add_tool(tool)
    if operator is not None:
        server.add_tool(forget_tool(operator))
    return server


def main(operator: str | None = None) -> None:
    """Serve the tools over stdio, the transport agent hosts spawn a server with, its start-up objects frozen: they
    live as long as the server, and the cyclic collector's full passes would scan them all (docs/scaling.md item 31)."""
    tracing.configure("mcp")
    server = build_server(operator)
    gc.collect()
    gc.freeze()
    server.run()  # stdio


if __name__ == "__main__":
    main()
