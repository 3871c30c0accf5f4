#!/usr/bin/env node
// A scripted MCP client built on the official TypeScript SDK (Client + StreamableHTTPClientTransport),
// used by Sluice's end-to-end tests to check interoperability with the reference implementation.
//
// Usage:
//   node ts-client.mjs URL SCRIPT
//
// SCRIPT is JSON (inline, or `@path` to read it from a file): either an array of steps, or an object
//   {
//     "steps": [ ... ],
//     "clientInfo": { "name": "...", "version": "..." },      // optional
//     "capabilities": { ... },                                  // optional, declared client capabilities
//     "sampling": { <CreateMessageResult> },                    // optional canned sampling/createMessage answer
//     "elicitation": { <ElicitResult> },                        // optional canned elicitation/create answer
//     "roots": [ { "uri": "file:///...", "name": "..." } ],     // optional roots/list answer
//     "headers": { "X-Foo": "bar" },                            // optional extra HTTP headers
//     "timeoutMs": 30000,                                       // per request (default 30 s)
//     "deadlineMs": 120000                                      // whole run (default 120 s)
//   }
// Declaring "sampling", "elicitation" or "roots" also declares the matching capability.
//
// A step is an object with "op" and the op's fields; any step may add "allowError": true, in which
// case a JSON-RPC error becomes that step's result as {"error": {"code", "message", "data"}} instead
// of failing the run. Ops:
//   {"op":"listTools"}  {"op":"listPrompts"}  {"op":"listResources"}  {"op":"listResourceTemplates"}
//       all pages are fetched and merged unless "cursor" is given (then exactly that one page)
//   {"op":"callTool", "name":"echo", "arguments":{...}, "progress": true}
//       "progress": true asks for progress notifications (recorded under "notifications")
//   {"op":"getPrompt", "name":"...", "arguments":{...}}
//   {"op":"readResource", "uri":"..."}
//   {"op":"subscribeResource", "uri":"..."}  {"op":"unsubscribeResource", "uri":"..."}
//   {"op":"complete", "params":{...}}  {"op":"setLoggingLevel", "level":"debug"}  {"op":"ping"}
//   {"op":"request", "method":"...", "params":{...}}   any request; the raw result is recorded
//       "taskFrom": N sets params.taskId to the task step N created (result.task.taskId)
//   {"op":"notify", "method":"...", "params":{...}}    send a notification; result is null
//   {"op":"sleep", "ms":100}                           wait (e.g. for notifications); result is null
//   {"op":"terminateSession"}                           HTTP DELETE of the session; result is null
//
// Output: exactly one JSON object on stdout,
//   {
//     "protocolVersion": "...", "serverInfo": {...}, "serverCapabilities": {...},
//     "instructions": "..." | null, "sessionId": "..." | null,
//     "results": [ <one entry per step> ],
//     "notifications": [ {"method", "params"} ... ],   // server notifications, in arrival order
//     "serverRequests": [ {"method", "params"} ... ]   // server-to-client requests, in arrival order
//   }
// Exit status: 0 when every step succeeded; 1 when connecting or a step failed (the object is still
// printed, with "error" and "failedStep" set); 2 on a usage error; 3 when "deadlineMs" ran out.

import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  ResultSchema,
} from "@modelcontextprotocol/sdk/types.js";

function usage(message) {
  process.stderr.write(`ts-client: ${message}\nusage: node ts-client.mjs URL SCRIPT_JSON|@FILE\n`);
  process.exit(2);
}

function writeAndExit(object, code) {
  const text = JSON.stringify(object) + "\n";
  process.stdout.write(text, () => process.exit(code));
}

function errorInfo(err) {
  if (err && typeof err === "object") {
    const info = { message: String(err.message ?? err) };
    if (typeof err.code === "number") info.code = err.code;
    if (err.data !== undefined) info.data = err.data;
    return info;
  }
  return { message: String(err) };
}

const [url, scriptArg] = process.argv.slice(2);
if (!url || scriptArg === undefined) usage("missing arguments");

let script;
try {
  const text = scriptArg.startsWith("@") ? readFileSync(scriptArg.slice(1), "utf8") : scriptArg;
  script = JSON.parse(text);
} catch (err) {
  usage(`SCRIPT is not valid JSON: ${err.message}`);
}
if (Array.isArray(script)) script = { steps: script };
if (!script || typeof script !== "object" || !Array.isArray(script.steps)) {
  usage("SCRIPT must be an array of steps or an object with a \"steps\" array");
}

const timeout = script.timeoutMs ?? 30000;
const deadline = script.deadlineMs ?? 120000;

const output = {
  protocolVersion: null,
  serverInfo: null,
  serverCapabilities: null,
  instructions: null,
  sessionId: null,
  results: [],
  notifications: [],
  serverRequests: [],
};

const watchdog = setTimeout(() => {
  output.error = { message: `deadline of ${deadline} ms ran out` };
  output.failedStep = output.results.length;
  writeAndExit(output, 3);
}, deadline);

const capabilities = { ...(script.capabilities ?? {}) };
if (script.sampling !== undefined) capabilities.sampling ??= {};
if (script.elicitation !== undefined) capabilities.elicitation ??= {};
if (script.roots !== undefined) capabilities.roots ??= { listChanged: true };

const client = new Client(script.clientInfo ?? { name: "sluice-e2e-ts-client", version: "1.0.0" }, {
  capabilities,
});

client.fallbackNotificationHandler = async (notification) => {
  output.notifications.push({ method: notification.method, params: notification.params ?? null });
};

if (script.sampling !== undefined) {
  client.setRequestHandler(CreateMessageRequestSchema, async (request) => {
    output.serverRequests.push({ method: request.method, params: request.params ?? null });
    return script.sampling;
  });
}
if (script.elicitation !== undefined) {
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    output.serverRequests.push({ method: request.method, params: request.params ?? null });
    return script.elicitation;
  });
}
if (script.roots !== undefined) {
  client.setRequestHandler(ListRootsRequestSchema, async (request) => {
    output.serverRequests.push({ method: request.method, params: request.params ?? null });
    return { roots: script.roots };
  });
}

const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: script.headers ? { headers: script.headers } : undefined,
});

async function listAll(step, fetchPage, key) {
  if (step.cursor !== undefined) return fetchPage({ cursor: step.cursor });
  const items = [];
  let cursor;
  for (let page = 0; page < 1000; page++) {
    const result = await fetchPage(cursor === undefined ? undefined : { cursor });
    items.push(...(result[key] ?? []));
    if (!result.nextCursor) return { [key]: items };
    cursor = result.nextCursor;
  }
  throw new Error(`more than 1000 pages of ${key}`);
}

async function runStep(step, index) {
  const options = { timeout };
  switch (step.op) {
    case "listTools":
      return listAll(step, (p) => client.listTools(p, options), "tools");
    case "listPrompts":
      return listAll(step, (p) => client.listPrompts(p, options), "prompts");
    case "listResources":
      return listAll(step, (p) => client.listResources(p, options), "resources");
    case "listResourceTemplates":
      return listAll(step, (p) => client.listResourceTemplates(p, options), "resourceTemplates");
    case "callTool": {
      const callOptions = { ...options };
      if (step.progress) {
        callOptions.onprogress = (progress) => {
          output.notifications.push({ method: "notifications/progress", params: progress, step: index });
        };
        callOptions.resetTimeoutOnProgress = true;
      }
      return client.callTool({ name: step.name, arguments: step.arguments ?? {} }, undefined, callOptions);
    }
    case "getPrompt":
      return client.getPrompt({ name: step.name, arguments: step.arguments }, options);
    case "readResource":
      return client.readResource({ uri: step.uri }, options);
    case "subscribeResource":
      return client.subscribeResource({ uri: step.uri }, options);
    case "unsubscribeResource":
      return client.unsubscribeResource({ uri: step.uri }, options);
    case "complete":
      return client.complete(step.params, options);
    case "setLoggingLevel":
      return client.setLoggingLevel(step.level, options);
    case "ping":
      return client.ping(options);
    case "request": {
      let params = step.params;
      if (step.taskFrom !== undefined) {
        // The task a previous step created (2025-11-25 CreateTaskResult).
        params = { ...(params ?? {}), taskId: output.results[step.taskFrom]?.task?.taskId };
      }
      return client.request({ method: step.method, params }, ResultSchema, options);
    }
    case "notify":
      await client.notification({ method: step.method, params: step.params });
      return null;
    case "sleep":
      await new Promise((resolve) => setTimeout(resolve, step.ms ?? 0));
      return null;
    case "terminateSession":
      await transport.terminateSession();
      return null;
    default:
      throw new Error(`unknown op ${JSON.stringify(step.op)}`);
  }
}

async function main() {
  try {
    await client.connect(transport, { timeout });
  } catch (err) {
    output.error = errorInfo(err);
    output.failedStep = -1;
    return 1;
  }
  output.protocolVersion = transport.protocolVersion ?? null;
  output.serverInfo = client.getServerVersion() ?? null;
  output.serverCapabilities = client.getServerCapabilities() ?? null;
  output.instructions = client.getInstructions() ?? null;
  output.sessionId = transport.sessionId ?? null;

  let code = 0;
  for (const [index, step] of script.steps.entries()) {
    try {
      const result = await runStep(step, index);
      output.results.push(result === undefined ? null : result);
    } catch (err) {
      if (step.allowError) {
        output.results.push({ error: errorInfo(err) });
        continue;
      }
      output.error = errorInfo(err);
      output.failedStep = index;
      code = 1;
      break;
    }
  }
  try {
    await client.close();
  } catch {
    // The connection is being torn down anyway.
  }
  return code;
}

const code = await main();
clearTimeout(watchdog);
if (code !== 0) process.stderr.write(`ts-client: failed: ${JSON.stringify(output.error)}\n`);
writeAndExit(output, code);
