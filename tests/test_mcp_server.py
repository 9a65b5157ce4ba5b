"""The MCP server over stdio, driven by the official client."""

import asyncio
import gc
import json
import os
import sys

from click.testing import CliRunner

from memory_assets import vocabulary as V
from memory_assets.cli import main


def server(*args, operators=None):
    """The stdio server's parameters: `memory-assets mcp ARGS` with the deployment's operator list (or none)."""
    from mcp import StdioServerParameters

    env = {key: value for key, value in os.environ.items() if key != V.OPERATORS_ENV}
    if operators is not None:
        env[V.OPERATORS_ENV] = operators
    return StdioServerParameters(command=sys.executable, args=["-m", "memory_assets.cli", "mcp", *args],
                                 env={**env, "HF_HUB_OFFLINE": "1"})


def test_mcp_client_round_trips_remember_recall_forget(clean):
    from mcp import ClientSession
    from mcp.client.stdio import stdio_client

    async def session_calls():
        params = server("--operator", "alice", operators="bob, alice")
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
            cited = f"per {mine['token']}"
            assert (await call("cite", project="acme", task_id="T-bo", text=cited, persona="bo"))["cited"] == []
            assert (await call("cite", project="acme", task_id="T-ana", text=cited, persona="ana"))["cited"] == [
                mine["token"]]
            before = await call("recall", project="acme", query="staging bastion", persona="ana", as_of="2000-01-01")
            assert before["hits"] == []
            assert (await call("recall", project="acme", query="staging bastion", persona="ana",
                               types=["procedural"]))["hits"] == []
            refused = await session.call_tool("recall", {"project": "acme", "query": "x", "as_of": "soon"})
            assert refused.isError and "as_of: must be an ISO 8601 time" in refused.content[0].text

    asyncio.run(session_calls())


def test_forget_is_served_only_to_an_operator_the_deployment_lists(clean, monkeypatch):
    """Started without --operator the server has no forget tool (an agent cannot name itself an operator); an
    --operator the deployment does not list is refused before the server starts (exit 2, naming the setting)."""
    from mcp import ClientSession
    from mcp.client.stdio import stdio_client

    async def tool_names(params):
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            names = {t.name for t in (await session.list_tools()).tools}
            forget_schema = next((t.inputSchema for t in (await session.list_tools()).tools if t.name == "forget"), {})
            return names, set(forget_schema.get("properties", {}))

    names, _ = asyncio.run(tool_names(server(operators="alice")))
    assert "forget" not in names and {"remember", "recall", "confirm", "flag", "cite"} <= names
    names, arguments = asyncio.run(tool_names(server("--operator", "alice", operators="alice")))
    assert "forget" in names and arguments == {"project", "token", "reason"}  # no actor an agent could set

    monkeypatch.delenv(V.OPERATORS_ENV, raising=False)
    refused = CliRunner().invoke(main, ["mcp", "--operator", "alice"])
    assert refused.exit_code == 2 and V.OPERATORS_ENV in refused.stderr
    monkeypatch.setenv(V.OPERATORS_ENV, "bob")
    refused = CliRunner().invoke(main, ["mcp", "--operator", "alice"])
    assert refused.exit_code == 2 and V.OPERATORS_ENV in refused.stderr


def test_the_server_freezes_its_start_up_objects_before_it_serves(monkeypatch):
    """The collector's full passes never scan what the server holds for its life (modules, the SDK's models): in a
    process with torch loaded each pass took ~100 ms, landing on whichever recall tipped its threshold."""
    from mcp.server.fastmcp import FastMCP

    from memory_assets import mcp_server, tracing

    frozen = []
    monkeypatch.setattr(tracing, "configure", lambda service: None)
    monkeypatch.setattr(FastMCP, "run", lambda self, *a, **kw: frozen.append(gc.get_freeze_count()))
    gc.unfreeze()
    try:
        mcp_server.main()
    finally:
        gc.unfreeze()
    assert frozen and frozen[0] > 10_000


def test_the_server_freezes_what_its_first_recall_loaded_once(clean, monkeypatch):
    """The pool and the query encoder load on the first recall, after main() froze the start-up objects: that recall
    freezes them too, and no later one freezes again (request objects alive then would never be scanned)."""
    import memory_assets
    from memory_assets import mcp_server

    monkeypatch.setattr(mcp_server, "_memory", memory_assets.connect(clean))
    monkeypatch.setattr(mcp_server, "_served", False)
    freezes = []
    monkeypatch.setattr(gc, "freeze", lambda: freezes.append("frozen"))
    try:
        for _ in range(3):
            assert mcp_server.recall("acme", "staging sslmode")["mode"]
    finally:
        mcp_server._memory.close()
    assert len(freezes) == 1


def test_a_tool_argument_of_the_wrong_type_is_refused_without_its_value():
    """Regression: the SDK's own check of an argument's type quoted the value in its error, so a credential an
    agent pasted into k, a title given as an object or a task id given as a list came back in the answer."""
    from mcp.server.fastmcp.exceptions import ToolError

    from memory_assets import mcp_server

    secret = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    server = mcp_server.build_server()
    calls = [("recall", {"project": "acme", "query": "staging", "k": secret}),
             ("remember", {"project": "acme", "kind": "env", "type": "semantic", "title": {"x": secret}, "body": "b"}),
             ("confirm", {"project": "acme", "token": "mem-1", "task_id": [secret]})]
    for name, arguments in calls:
        try:
            asyncio.run(server.call_tool(name, arguments))
        except ToolError as error:
            assert secret not in str(error) and name in str(error)
        else:
            raise AssertionError(f"{name} took an argument of the wrong type")
