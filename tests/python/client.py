"""Drive Sluice with the official MCP Python SDK client (PyPI `mcp` 2.x).

    client.py MODE URL

MODE is `auto` (probe `server/discover`, fall back to `initialize`) or `legacy` (the handshake).
Lists the tools, calls `fx_echo`, and runs an elicitation and a sampling round trip through the
gateway (the callbacks below answer them). Prints one JSON object with what happened; any
failure is an exception (non-zero exit).
"""

import asyncio
import json
import sys

from mcp import Client, types


async def on_elicit(context, params):
    return types.ElicitResult(action="accept", content={"response": "Ada"})


async def on_sample(context, params):
    return types.CreateMessageResult(
        role="assistant",
        content=types.TextContent(type="text", text="Paris"),
        model="sluice-test-model",
        stop_reason="endTurn",
    )


def text_of(result):
    return [c.text for c in result.content if getattr(c, "type", None) == "text"]


async def main(mode, url):
    async with Client(
        url,
        mode=mode,
        elicitation_callback=on_elicit,
        sampling_callback=on_sample,
    ) as client:
        tools = await client.list_tools()
        echo = await client.call_tool("fx_echo", {"said": "hello"})
        elicit = await client.call_tool("fx_test_elicitation", {"message": "Your name?"})
        sample = await client.call_tool("fx_test_sampling", {"prompt": "Capital of France?"})
        out = {
            "protocol_version": client.session.protocol_version,
            "tools": sorted(t.name for t in tools.tools),
            "echo": echo.structured_content,
            "elicitation": text_of(elicit),
            "sampling": text_of(sample),
        }
        print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
