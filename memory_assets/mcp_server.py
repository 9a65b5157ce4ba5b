"""The MCP server (stdio, the official SDK): remember, recall, forget, confirm, flag and cite as agent tools."""

from __future__ import annotations

from mcp.server.fastmcp import FastMCP

import memory_assets
from memory_assets import gates
from memory_assets import vocabulary as V
from memory_assets.authz import Actor

server = FastMCP("memory-assets")
_memory = None


def memory():
    global _memory
    if _memory is None:
        _memory = memory_assets.connect()
    return _memory


@server.tool()
def remember(project: str, kind: str, type: str, title: str, body: str, paths: list[str] | None = None,
             keywords: list[str] | None = None, confidence: float = V.DEFAULT_CONFIDENCE, task_id: str | None = None,
             session_id: str | None = None, supersedes: str | None = None, persona: str | None = None,
             private: bool = False) -> dict:
    """Contribute one fact (one unit) to a project's shared memory (private: only `persona` recalls it); returns
    its status and mem-<n> token."""
    r = memory().remember(project=project, kind=kind, type=type, title=title, body=body, paths=paths,
                          keywords=keywords, confidence=confidence, feed="mcp", task_id=task_id,
                          session_id=session_id, supersedes=supersedes, persona=persona,
                          visibility=V.VISIBILITY_PRIVATE if private else V.DEFAULT_VISIBILITY)
    return {"status": r.status, "token": r.token, "reason": r.reason}


@server.tool()
def recall(project: str, query: str, k: int = V.RECALL_DEFAULT_K, kinds: list[str] | None = None,
           types: list[str] | None = None, paths: list[str] | None = None, as_of: str | None = None,
           persona: str | None = None) -> dict:
    """Search a project's memory (dense + full text), optionally by kind, type, path prefix, as of an ISO time
    (history), and as a persona (its private units too); hits are untrusted notes with tokens to cite."""
    result = memory().recall(project, query, k, kinds=kinds, types=types, paths=paths,
                             as_of=gates.iso_time("as_of", as_of, naive_is_utc=True) if as_of else None,
                             actor=Actor.reader(project, persona))
    return {"mode": result.mode, "hits": [{"token": h.token, "title": h.title, "body": h.body, "kind": h.kind,
                                          "score": h.score, "citations": [c["task_id"] for c in h.citations]}
                                         for h in result.hits]}


@server.tool()
def forget(project: str, token: str, reason: str, actor: str = "mcp-agent") -> dict:
    """Forget a unit for good (its text is blanked everywhere; the id stays for the audit)."""
    memory().forget(project, token, Actor.for_project(project, actor, forget=True), reason=reason)
    return {"token": token, "status": "forgotten"}


@server.tool()
def confirm(project: str, token: str, task_id: str) -> dict:
    """Confirm a unit was right in this task (one vote per task)."""
    return memory().confirm(project, token, task_id)


@server.tool()
def flag(project: str, token: str, task_id: str) -> dict:
    """Flag a unit as wrong or harmful in this task (one vote per task)."""
    return memory().flag(project, token, task_id)


@server.tool()
def cite(project: str, task_id: str, text: str) -> dict:
    """Record which mem-<n> tokens of this project an answer cites."""
    return {"cited": memory().cite_from_text(project, task_id, text)}


def main() -> None:
    server.run()  # stdio


if __name__ == "__main__":
    main()
