// A hook server built on Civic's @civic/hook-common (npm, pinned in package.json), for the
// e2e test of Sluice's `civic` hook kind with 2026-07-28 clients:
//
//   node civic-modern.mjs PORT
//
// It logs every call it gets to calls.log in its working directory, one a line:
// `<procedure> <method> <detail>`. What it does:
// - processOtherRequest: server/discover and subscriptions/listen go on; a subscriptions/listen
//   asking for promptsListChanged is refused by throwing McpError(-32042, "no prompt news").
// - processOtherResult: a server/discover result gets `instructions: "civic saw discover"`.
// - processTargetRequest: an elicitation/create gets "[civic] " before its message; one whose
//   message says "forbidden" is refused with McpError(-32043, "Civic will not ask that").
// - processTargetResult: the client's answer gets `"civic": true` in its content; the answer to
//   a question that says "secret" is refused with McpError(-32044, "Civic keeps that answer").
import { AbstractHook, startHookServer } from "@civic/hook-common";
import { McpError } from "@modelcontextprotocol/sdk/types.js";
import { appendFileSync } from "node:fs";

const [port] = process.argv.slice(2);
const log = (...what) => appendFileSync("calls.log", `${what.join(" ")}\n`);

class ModernHook extends AbstractHook {
  get name() {
    return "test-modern";
  }

  async processOtherRequest(request, extra) {
    log("processOtherRequest", request.method, JSON.stringify(request.params ?? {}), extra.requestId);
    if (request.method === "subscriptions/listen" && request.params?.notifications?.promptsListChanged) {
      throw new McpError(-32042, "no prompt news");
    }
    return { resultType: "continue", request };
  }

  async processOtherResult(response, originalRequest, extra) {
    log("processOtherResult", originalRequest.method, extra.requestId);
    if (originalRequest.method !== "server/discover") return { resultType: "continue", response };
    return { resultType: "continue", response: { ...response, instructions: "civic saw discover" } };
  }

  async processOtherError(error, originalRequest, extra) {
    log("processOtherError", originalRequest.method, error.code);
    return { resultType: "continue" };
  }

  async processCallToolRequest(request, extra) {
    log("processCallToolRequest", request.params.name, extra.requestId);
    return { resultType: "continue", request };
  }

  async processCallToolResult(response, originalRequest, extra) {
    log("processCallToolResult", originalRequest.params.name, response.resultType ?? "-");
    return { resultType: "continue", response };
  }

  async processTargetRequest(request, extra) {
    log("processTargetRequest", request.method, request.params?.message ?? "", extra.requestId);
    if (request.method !== "elicitation/create") return { resultType: "continue", request };
    if (request.params.message.includes("forbidden")) {
      throw new McpError(-32043, "Civic will not ask that");
    }
    return { resultType: "continue", request: { ...request, params: { ...request.params, message: `[civic] ${request.params.message}` } } };
  }

  async processTargetResult(response, originalRequest, extra) {
    log("processTargetResult", originalRequest.method, response.action, extra.requestId);
    if (originalRequest.params?.message?.includes("secret")) {
      throw new McpError(-32044, "Civic keeps that answer");
    }
    return { resultType: "continue", response: { ...response, content: { ...response.content, civic: true } } };
  }

  async processTargetError(error, originalRequest, extra) {
    log("processTargetError", originalRequest.method, error.code);
    return { resultType: "continue" };
  }
}

await startHookServer(new ModernHook(), Number(port));
