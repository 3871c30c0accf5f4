"""One user's session through Sluice with the official MCP Python SDK client (PyPI `mcp` 2.x):
a list of tool calls made in order, each answered as `connect_client.py` answers URL-mode
elicitations (open the link as USER's browser would, confirm Sluice's page, accept; or decline).

    connections_client.py MODE URL TOKEN USER ANSWER CALLS

MODE, ANSWER: as for `connect_client.py`. CALLS is a JSON list of `[tool, arguments]` pairs.
Prints one JSON object: the questions asked, and each call's text, structured content and
`isError`, or its JSON-RPC error.
"""

import asyncio
import json
import sys

import connect_client
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


async def one(client, tool, args):
    try:
        r = await client.call_tool(tool, args)
    except Exception as e:  # the SDK raises the JSON-RPC error
        err = getattr(e, "error", None)
        return {"error": {"code": getattr(err, "code", None), "message": getattr(err, "message", str(e))}}
    return {
        "text": [c.text for c in r.content if getattr(c, "type", None) == "text"],
        "structured": r.structured_content,
        "is_error": bool(r.is_error),
    }


async def main(mode, url, token, user, answer, calls):
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    kwargs = {}
    if mode != "nocap":
        kwargs["elicitation_callback"] = connect_client.make_callback(user, answer)
    sdk_mode = "legacy" if mode == "nocap" else mode
    results = []
    async with Client(streamable_http_client(url, http_client=http), mode=sdk_mode, **kwargs) as client:
        for tool, args in json.loads(calls):
            results.append(await one(client, tool, args))
    print(json.dumps({"asked": connect_client.asked, "results": results}))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:7]))
