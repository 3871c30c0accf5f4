"""Call one tool through Sluice as one user, with the official MCP Python SDK client (PyPI `mcp`
2.x) and a bearer token, answering URL-mode elicitations the way a person with a browser would:
open the link (an HTTP client that keeps cookies and follows redirects, signed in at the
authorization server as USER through the `x-test-user` header the tests' server reads), confirm
the page Sluice shows (its form posted back with its CSRF token), and accept.

    connect_client.py MODE URL TOKEN TOOL USER ANSWER [ARGS]

MODE is `auto` (2026-07-28: the question arrives as an `input_required` round) or `legacy`
(`elicitation/create` on the call's stream); `nocap` is `legacy` with no elicitation callback
(the client declares no elicitation capability). ANSWER is `browse` (open the link, confirm,
accept) or `decline`. The tool is called twice, with ARGS (a JSON object; default `{}`). Prints
one JSON object: the questions asked (mode, message, URL, elicitation id, the callback page's
status and text) and each call's text or error.
"""

import asyncio
import json
import re
import sys

import httpx2
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client

asked = []


async def browse(url, user):
    """Open the connect link as USER's browser would: the confirmation page, its form posted
    back, then every redirect to the authorization server and back to Sluice's callback."""
    async with httpx2.AsyncClient(
        follow_redirects=True, headers={"x-test-user": user}, timeout=30
    ) as browser:
        page = await browser.get(url)
        found = re.search(r'name="?csrf"? value="([^"]+)"', page.text)
        if not found:
            return {"status": page.status_code, "text": page.text[:300]}
        done = await browser.post(url, data={"csrf": found.group(1)})
        return {"status": done.status_code, "text": re.sub(r"<[^>]+>", " ", done.text)[:300]}


def make_callback(user, answer):
    async def on_elicit(context, params):
        q = {
            "mode": getattr(params, "mode", None),
            "message": params.message,
            "url": getattr(params, "url", None),
            "elicitation_id": getattr(params, "elicitation_id", None),
        }
        asked.append(q)
        if answer == "decline":
            return types.ElicitResult(action="decline")
        q["page"] = await browse(q["url"], user)
        return types.ElicitResult(action="accept")

    return on_elicit


async def call(client, tool, args):
    try:
        r = await client.call_tool(tool, args)
        return {"text": [c.text for c in r.content if getattr(c, "type", None) == "text"]}
    except Exception as e:  # the SDK raises the JSON-RPC error
        err = getattr(e, "error", None)
        return {
            "error": {
                "code": getattr(err, "code", None),
                "message": getattr(err, "message", str(e)),
                "data": getattr(err, "data", None),
            }
        }


async def main(mode, url, token, tool, user, answer, args="{}"):
    args = json.loads(args)
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    kwargs = {}
    if mode != "nocap":
        kwargs["elicitation_callback"] = make_callback(user, answer)
    sdk_mode = "legacy" if mode == "nocap" else mode
    async with Client(streamable_http_client(url, http_client=http), mode=sdk_mode, **kwargs) as client:
        first = await call(client, tool, args)
        second = await call(client, tool, args)
    print(json.dumps({"asked": asked, "first": first, "second": second}))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:8]))
