// The benchmark suite's echo upstream on the official MCP TypeScript SDK, written the way the
// SDK's own README serves Streamable HTTP: McpServer + StreamableHTTPServerTransport, stateful
// sessions (one transport per Mcp-Session-Id), SSE replies (the SDK default), Express app from
// createMcpExpressApp. One `echo` tool answering its arguments as text and structuredContent.
//
//   node server.mjs [--listen 127.0.0.1:PORT] [--tools N]     (endpoint: /mcp)
//   node server.mjs --stdio [--tools N]
//
// --tools N lists N tools in all: `echo` plus echo_0001 … (each echoes too).

import { randomUUID } from "node:crypto";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { createMcpExpressApp } from "@modelcontextprotocol/sdk/server/express.js";
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 && i + 1 < args.length ? args[i + 1] : dflt;
};
const stdio = args.includes("--stdio");
const listen = opt("--listen", "127.0.0.1:3002");
const tools = Math.max(1, Number.parseInt(opt("--tools", "1"), 10) || 1);

// The load generator sends {i, text}; the schema is what a real server would declare.
const shape = { i: z.number().int(), text: z.string() };

function newServer() {
  const server = new McpServer({ name: "sluice-bench-ts-echo", version: "0.0.0" });
  const echo = async (a) => ({
    content: [{ type: "text", text: JSON.stringify(a) }],
    structuredContent: a,
  });
  server.registerTool(
    "echo",
    {
      description: "Answers its arguments back, as text and as structuredContent.",
      inputSchema: shape,
      outputSchema: shape,
    },
    echo,
  );
  for (let i = 1; i < tools; i++) {
    const name = `echo_${String(i).padStart(4, "0")}`;
    server.registerTool(
      name,
      { description: `Echo number ${i}: answers its arguments back.`, inputSchema: shape, outputSchema: shape },
      echo,
    );
  }
  return server;
}

if (stdio) {
  await newServer().connect(new StdioServerTransport());
} else {
  const [host, port] = [listen.slice(0, listen.lastIndexOf(":")), Number(listen.slice(listen.lastIndexOf(":") + 1))];
  const app = createMcpExpressApp({ host });
  const transports = {};

  app.post("/mcp", async (req, res) => {
    const sid = req.headers["mcp-session-id"];
    let transport = sid ? transports[sid] : undefined;
    if (!transport) {
      if (sid || !isInitializeRequest(req.body)) {
        res.status(sid ? 404 : 400).json({
          jsonrpc: "2.0",
          error: { code: -32000, message: sid ? "Session not found" : "No valid session ID provided" },
          id: null,
        });
        return;
      }
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => {
          transports[id] = transport;
        },
      });
      transport.onclose = () => {
        if (transport.sessionId) delete transports[transport.sessionId];
      };
      await newServer().connect(transport);
    }
    await transport.handleRequest(req, res, req.body);
  });

  const other = async (req, res) => {
    const transport = transports[req.headers["mcp-session-id"]];
    if (!transport) {
      res.status(400).send("Invalid or missing session ID");
      return;
    }
    await transport.handleRequest(req, res);
  };
  app.get("/mcp", other);
  app.delete("/mcp", other);

  app.listen(port, host, () => {
    console.error(`sluice-bench-ts-echo: listening on http://${host}:${port}/mcp`);
  });
}
