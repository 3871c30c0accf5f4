"""Call one tool through Sluice with the official MCP Python SDK client (PyPI `mcp` 2.x) and
answer the elicitations it gets the way a person would, for the tests of hooks that ask.

    ask_client.py MODE URL TOOL ARGS_JSON ANSWER

MODE is `auto` (2026-07-28: the question arrives as an `input_required` round) or `legacy`
(`elicitation/create` on the call's stream). ANSWER is `allow` (accept, allow: true), `refuse`
(accept, allow: false), `decline` or `cancel`. Prints one JSON object: the questions asked
(message and requested schema), and the call's result or its JSON-RPC error.
"""

import asyncio
import json
import sys

from mcp import Client, types

asked = []


def make_callback(answer):
    async def on_elicit(context, params):
        asked.append({"message": params.message, "schema": params.requested_schema})
        if answer == "allow":
            return types.ElicitResult(action="accept", content={"allow": True})
        if answer == "refuse":
            return types.ElicitResult(action="accept", content={"allow": False})
        return types.ElicitResult(action=answer)

    return on_elicit


async def main(mode, url, tool, args, answer):
    out = {}
    async with Client(url, mode=mode, elicitation_callback=make_callback(answer)) as client:
        try:
            r = await client.call_tool(tool, args)
            out["result"] = {
                "text": [c.text for c in r.content if getattr(c, "type", None) == "text"],
                "structured": r.structured_content,
                "is_error": r.is_error,
            }
        except Exception as e:  # the SDK raises the JSON-RPC error
            err = getattr(e, "error", None)
            out["error"] = {
                "code": getattr(err, "code", None),
                "message": getattr(err, "message", str(e)),
                "data": getattr(err, "data", None),
            }
    out["asked"] = asked
    print(json.dumps(out))


if __name__ == "__main__":
    m, u, t, a, ans = sys.argv[1:6]
    asyncio.run(main(m, u, t, json.loads(a), ans))
