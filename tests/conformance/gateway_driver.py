"""Drives `sluice serve` for auth-gateway.sh with the MCP Python SDK client: waits (bounded) until
the gateway lists the scenario's tool, then calls it. Exit 0: listed and called; 3: the upstream
needs a (new) login, or its tool did not appear in time; 1: any other failure.

    gateway_driver.py URL WAIT [TOKEN MODE]

With TOKEN the upstream is a per-user one and the client is a principal (its bearer TOKEN):
it calls the tool at once (nothing lists it before someone connects) in MODE (`legacy`, or
`auto` for 2026-07-28), and answers the gateway's URL elicitation as a person with a browser
would (connect_client.py's `browse`: Sluice's confirmation page, then the authorization
server, which approves at once, then the callback). A call that fails because the user's
account is not connected (the upstream asked for more scopes, another authorization server) is
made again, at most three times in all."""

import asyncio
import sys
import time
from pathlib import Path

import httpx2
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from connect_client import browse  # noqa: E402

TOOL = "remote_test-tool"


def failure(e):
    err = getattr(e, "error", None)
    return getattr(err, "message", str(e))


async def on_elicit(context, params):
    page = await browse(params.url, "conformance-user")
    print(f"driver: opened the connect link: {page['status']}", file=sys.stderr)
    return types.ElicitResult(action="accept" if page["status"] == 200 else "decline")


async def per_user(url: str, token: str, mode: str) -> int:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    transport = streamable_http_client(url, http_client=http)
    async with Client(transport, mode=mode, elicitation_callback=on_elicit) as client:
        for _ in range(3):
            try:
                result = await client.call_tool(TOOL, {})
            except Exception as e:  # the SDK raises the JSON-RPC error
                message = failure(e)
                print(f"driver: the call failed: {message}", file=sys.stderr)
                if "not connected" in message or "needs login" in message:
                    continue
                return 1
            texts = [c.text for c in result.content if getattr(c, "type", None) == "text"]
            print(f"driver: called {TOOL}: {texts}", file=sys.stderr)
            return 1 if result.is_error else 0
    return 1


async def main(url: str, wait: float) -> int:
    deadline = time.monotonic() + wait
    async with Client(url, mode="legacy") as client:
        while True:
            tools = await client.list_tools()
            if any(t.name == TOOL for t in tools.tools):
                break
            if time.monotonic() > deadline:
                print(f"driver: {TOOL} not listed within {wait} s", file=sys.stderr)
                return 3
            await asyncio.sleep(0.2)
        try:
            result = await client.call_tool(TOOL, {})
        except Exception as e:  # the SDK raises the JSON-RPC error
            message = failure(e)
            print(f"driver: the call failed: {message}", file=sys.stderr)
            return 3 if "needs login" in message or "unavailable" in message else 1
        texts = [c.text for c in result.content if getattr(c, "type", None) == "text"]
        print(f"driver: called {TOOL}: {texts}", file=sys.stderr)
        return 1 if result.is_error else 0


if __name__ == "__main__":
    if len(sys.argv) > 3:
        sys.exit(asyncio.run(per_user(sys.argv[1], sys.argv[3], sys.argv[4])))
    sys.exit(asyncio.run(main(sys.argv[1], float(sys.argv[2]))))
