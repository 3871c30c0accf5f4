// A hook server built on Civic's @civic/hook-common (npm, pinned in package.json), for the
// e2e tests of Sluice's `civic` hook kind:
//
//   node civic-hook.mjs PORT MODE
//
// MODE `modify`: every tools/list result gets "[civic] " before each description, a
//   tools/call gets `"civic": true` added to its arguments (the fixture's echo shows it), the
//   initialize result gets instructions, and an upstream's elicitation/create on its way to the
//   client gets "[civic] " before its message; the client's answer to it, on its way back to
//   the upstream, gets `"civic": true` in its content.
// MODE `abort`: a call of fx_add is refused by throwing an McpError with a reason (how
//   hook-common 0.9.0 aborts), and so is a result that says "secret" (in the response phase);
//   an upstream's elicitation whose message says "forbidden" is refused on its way to the
//   client, and the client's answer to one that says "secret" on its way back; other calls go
//   on.
// MODE `respond`: every call but of a `…test_elicitation` tool is answered by the hook without
//   reaching the upstream, and an upstream's elicitation is answered too (the client is not
//   asked).
// In every mode, an error reply to a call of fx_missing is replaced by a result.
// Every call the server gets is appended to calls.log beside this file's working directory
// (one procedure name a line), so a test can see what was called.
import { AbstractHook, startHookServer } from "@civic/hook-common";
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import { appendFileSync } from "node:fs";

const [port, mode] = process.argv.slice(2);
const log = (what) => appendFileSync("calls.log", `${what}\n`);

class TestHook extends AbstractHook {
  get name() {
    return `test-${mode}`;
  }

  async processListToolsResult(response, originalRequest, extra) {
    log(`processListToolsResult ${originalRequest.method}`);
    if (mode !== "modify") return { resultType: "continue", response };
    return {
      resultType: "continue",
      response: {
        ...response,
        tools: response.tools.map((t) => ({ ...t, description: `[civic] ${t.description ?? ""}` })),
      },
    };
  }

  async processInitializeResult(response, originalRequest, extra) {
    log(`processInitializeResult ${originalRequest.params.clientInfo.name}`);
    if (mode !== "modify") return { resultType: "continue", response };
    return { resultType: "continue", response: { ...response, instructions: "civic was here" } };
  }

  async processNotification(notification) {
    log(`processNotification ${notification.method}`);
    return { resultType: "continue", notification };
  }

  async processTargetRequest(request, extra) {
    log(`processTargetRequest ${request.method}`);
    if (request.method !== "elicitation/create") return { resultType: "continue", request };
    if (mode === "abort" && request.params.message.includes("forbidden")) {
      throw new McpError(ErrorCode.InvalidRequest, "Civic will not ask that");
    }
    if (mode === "respond") {
      return { resultType: "respond", response: { action: "accept", content: { response: `civic answered ${extra.requestId}` } } };
    }
    if (mode !== "modify") return { resultType: "continue", request };
    return { resultType: "continue", request: { ...request, params: { ...request.params, message: `[civic] ${request.params.message}` } } };
  }

  async processTargetResult(response, originalRequest, extra) {
    log(`processTargetResult ${originalRequest.method} ${response.action} ${extra.requestId}`);
    if (mode === "abort" && originalRequest.params.message.includes("secret")) {
      throw new Error("Civic keeps that answer from the upstream");
    }
    if (mode !== "modify") return { resultType: "continue", response };
    return { resultType: "continue", response: { ...response, content: { ...response.content, civic: true } } };
  }

  async processCallToolRequest(request, extra) {
    log(`processCallToolRequest ${request.params.name} ${extra.sessionId ? "session" : "no-session"}`);
    if (mode === "modify") {
      return {
        resultType: "continue",
        request: { ...request, params: { ...request.params, arguments: { ...request.params.arguments, civic: true } } },
      };
    }
    if (mode === "abort" && request.params.name === "fx_add") {
      throw new McpError(ErrorCode.InvalidRequest, `Civic says no to ${request.params.name}`);
    }
    if (mode === "respond" && !request.params.name.endsWith("test_elicitation")) {
      return { resultType: "respond", response: { content: [{ type: "text", text: `answered by civic for ${request.params.name}` }] } };
    }
    return { resultType: "continue", request };
  }

  async processCallToolResult(response, originalRequest, extra) {
    log(`processCallToolResult ${originalRequest.params.name}`);
    const text = JSON.stringify(response.content ?? []);
    if (mode === "abort" && text.includes("secret")) {
      throw new Error("the result holds a secret");
    }
    return { resultType: "continue", response };
  }

  async processCallToolError(error, originalToolCall, extra) {
    log(`processCallToolError ${originalToolCall.params.name} ${error.code}`);
    if (originalToolCall.params.name === "fx_missing") {
      return { resultType: "respond", response: { content: [{ type: "text", text: `civic replaced error ${error.code}` }] } };
    }
    return { resultType: "continue" };
  }
}

await startHookServer(new TestHook(), Number(port));
