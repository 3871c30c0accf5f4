"""Drives `sluice serve` for auth-gateway.sh with the MCP Python SDK client: waits (bounded) until
the gateway lists the scenario's tool, then calls it. Exit 0: listed and called; 3: the upstream
needs a (new) login, or its tool did not appear in time; 1: any other failure."""

import asyncio
import sys
import time

from mcp import Client

TOOL = "remote_test-tool"


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
            err = getattr(e, "error", None)
            message = getattr(err, "message", str(e))
            print(f"driver: the call failed: {message}", file=sys.stderr)
            return 3 if "needs login" in message or "unavailable" in message else 1
        texts = [c.text for c in result.content if getattr(c, "type", None) == "text"]
        print(f"driver: called {TOOL}: {texts}", file=sys.stderr)
        return 1 if result.is_error else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1], float(sys.argv[2]))))
