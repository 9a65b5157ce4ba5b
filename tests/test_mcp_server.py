"""The MCP server over stdio, driven by the official client."""

import asyncio
import json
import os
import sys


def test_mcp_client_round_trips_remember_recall_forget(clean):
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    async def session_calls():
        params = StdioServerParameters(command=sys.executable, args=["-m", "memory_assets.cli", "mcp"],
                                       env={**os.environ, "HF_HUB_OFFLINE": "1"})
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            tools = {t.name for t in (await session.list_tools()).tools}
            assert tools >= {"remember", "recall", "forget", "confirm", "flag", "cite"}

            async def call(name, **arguments):
                result = await session.call_tool(name, arguments)
                assert not result.isError, result.content
                return json.loads(result.content[0].text)

            stored = await call("remember", project="acme", kind="env", type="semantic", title="Staging needs TLS",
                                body="Staging PostgreSQL requires sslmode=require because the proxy refuses TCP.",
                                task_id="T-mcp")
            assert stored["status"] == "active" and stored["token"] == "mem-1"
            found = await call("recall", project="acme", query="staging postgres sslmode")
            assert [h["token"] for h in found["hits"]] == ["mem-1"]
            assert (await call("confirm", project="acme", token="mem-1", task_id="T-mcp"))["confirms"] == 1
            assert (await call("cite", project="acme", task_id="T-mcp", text="used mem-1"))["cited"] == ["mem-1"]
            assert (await call("forget", project="acme", token="mem-1", reason="test"))["status"] == "forgotten"
            assert (await call("recall", project="acme", query="staging postgres sslmode"))["hits"] == []
            mine = await call("remember", project="acme", kind="env", type="semantic", title="My staging login",
                              body="Ana logs in to staging through the bastion host.", task_id="T-ana",
                              persona="ana", private=True)
            assert (await call("recall", project="acme", query="staging bastion"))["hits"] == []
            found = await call("recall", project="acme", query="staging bastion", persona="ana")
            assert [h["token"] for h in found["hits"]] == [mine["token"]]
            before = await call("recall", project="acme", query="staging bastion", persona="ana", as_of="2000-01-01")
            assert before["hits"] == []
            assert (await call("recall", project="acme", query="staging bastion", persona="ana",
                               types=["procedural"]))["hits"] == []
            refused = await session.call_tool("recall", {"project": "acme", "query": "x", "as_of": "soon"})
            assert refused.isError and "as_of: must be an ISO 8601 time" in refused.content[0].text

    asyncio.run(session_calls())
