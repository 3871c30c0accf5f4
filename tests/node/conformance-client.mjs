#!/usr/bin/env node
// The client command of the conformance suite's client scenarios (the non-auth ones), with Sluice
// as the client under test, in one of two ways:
//
//   node conformance-client.mjs client URL    `sluice client` runs each request (a process each)
//   node conformance-client.mjs gateway URL   `sluice serve` gets URL as its upstream "remote";
//                                            the MCP TypeScript SDK client drives the scenario
//                                            through the gateway, whose upstream side is then
//                                            the client the suite sees
//
// The suite appends the scenario's URL and sets MCP_CONFORMANCE_SCENARIO,
// MCP_CONFORMANCE_PROTOCOL_VERSION (2026-07-28: the stateless era; otherwise the initialize
// handshake) and, for some scenarios, MCP_CONFORMANCE_CONTEXT ({"toolCalls": [{name, arguments}]},
// the arguments to call a tool with). SLUICE_BIN names the sluice binary; SLUICE_GATEWAY_PORTS
// (LISTEN,ADMIN) the gateway's two ports (else any free ones).
//
// Every scenario gets the same exercise, which is what a client does with a server it meets:
// list the tools and call each one (the context's arguments, else arguments made from the
// tool's input schema; `json_schema_echo` gets the input schema its client saw for
// `json_schema_2020_12_tool`, as that scenario asks), then, when the server declares them, list
// and read the resources and list and get the prompts (their errors are not failures).
// A server's elicitation is accepted with no content: `sluice client --elicit defaults` and the
// SDK client (which declares `applyDefaults`) fill in the schema's defaults.
//
// The Skills extension's client scenarios (`sep-2640-client-*`) get what a host does with skills
// instead: `sep-2640-client-no-prefetch` lists them (`sluice client URL skills`, or `skills/list`
// through the gateway) and reads nothing; each `sep-2640-client-verify-*` scenario serves a
// tampered SKILL.md, and the skill `pdf-processing` is loaded with its file references/FORMS.md
// (`sluice client URL skill pdf-processing references/FORMS.md`; through the gateway,
// `skills/list`, then `resources/read` of SKILL.md at the URI the gateway lists, and of FORMS.md
// only if that read succeeds). The expected outcome there is a refusal: `sluice client` exits 1
// with the verification failure the scenario tampers for (its size, its digest, its
// frontmatter), or the gateway answers the read of SKILL.md with a JSON-RPC error; then this
// command exits 0. Reading FORMS.md, or any other outcome, exits 1.
//
// The sign-in scenarios (`auth/*`) are handed to tests/conformance/auth-client.sh or
// auth-gateway.sh, so that a whole requirement set runs with this one command, e.g.
//   conformance client --requirements 2026-07-28 --command "node conformance-client.mjs client"
//
// Exit status: 0 when the server answered every tools/list and tools/call (a JSON-RPC error, or
// a tool result with isError, is an answer), 1 otherwise (the reason on stderr), 2 on a usage
// error.

import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema, McpError, ResultSchema } from "@modelcontextprotocol/sdk/types.js";

const [mode, url] = process.argv.slice(2);
if (!["client", "gateway"].includes(mode) || !url) {
  process.stderr.write("usage: node conformance-client.mjs client|gateway URL\n");
  process.exit(2);
}
const sluice = process.env.SLUICE_BIN;
if (!sluice) {
  process.stderr.write("conformance-client: SLUICE_BIN must name the sluice binary\n");
  process.exit(2);
}
// The sign-in scenarios have client commands of their own (tests/conformance/auth-*.sh, see
// tests/e2e/oauth/conformance.rs): handing them over lets a whole requirement set
// (`--requirements 2026-07-28`, which runs them too) run with this command.
if ((process.env.MCP_CONFORMANCE_SCENARIO ?? "").startsWith("auth/")) {
  const script = mode === "client" ? "auth-client.sh" : "auth-gateway.sh";
  const here = dirname(fileURLToPath(import.meta.url));
  const done = spawnSync(join(here, "..", "conformance", script), [url], { stdio: "inherit" });
  process.exit(done.status ?? 1);
}
const stateless = process.env.MCP_CONFORMANCE_PROTOCOL_VERSION === "2026-07-28";
const scenario = process.env.MCP_CONFORMANCE_SCENARIO ?? "";
const context = JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT || "{}");
const log = (m) => process.stderr.write(`conformance-client: ${m}\n`);

/// The server answered with a JSON-RPC error (or a tool result with `isError`).
class RpcError extends Error {}

/// Arguments for a tool: the context's, else one value per required property of its schema.
function argumentsFor(tool, originalName, tools) {
  const given = (context.toolCalls ?? []).find((c) => c.name === originalName);
  if (given) return given.arguments ?? {};
  if (originalName === "json_schema_echo") {
    const focal = tools.find((t) => t.original === "json_schema_2020_12_tool");
    if (focal) return { schema: focal.tool.inputSchema };
  }
  const schema = tool.inputSchema ?? {};
  const args = {};
  for (const name of schema.required ?? []) {
    const prop = schema.properties?.[name] ?? {};
    const type = Array.isArray(prop.type) ? prop.type[0] : prop.type;
    args[name] =
      prop.default ??
      (prop.enum ? prop.enum[0] : undefined) ??
      { number: 2, integer: 2, boolean: true, object: {}, array: [], null: null }[type] ??
      "us-west1";
  }
  return args;
}

/// The exercise, over `ops` (listTools, callTool, listResources, readResource, listPrompts,
/// getPrompt), with `original(name)` giving a tool's name at the scenario's server.
async function exercise(ops, original) {
  const failures = [];
  const capabilities = (await ops.capabilities()) ?? {};
  const listed = await ops.listTools();
  const tools = listed.map((tool) => ({ tool, original: original(tool.name) }));
  log(`tools: ${tools.map((t) => t.tool.name).join(", ") || "(none)"}`);
  for (const { tool, original: name } of tools) {
    if (name === null) continue;
    try {
      await ops.callTool(tool.name, argumentsFor(tool, name, tools));
    } catch (e) {
      // A JSON-RPC error is the server's answer (some scenarios' servers answer no call);
      // anything else means the client could not make the call.
      if (e instanceof RpcError) log(`tools/call ${tool.name}: ${e.message} (an answer)`);
      else failures.push(`tools/call ${tool.name}: ${e.message ?? e}`);
    }
  }
  const quiet = async (what, f) => {
    try {
      return await f();
    } catch (e) {
      log(`${what}: ${e.message ?? e} (not a failure)`);
      return [];
    }
  };
  if (capabilities.resources) {
    for (const r of await quiet("resources/list", ops.listResources)) {
      await quiet(`resources/read ${r.uri}`, () => ops.readResource(r.uri));
    }
  }
  if (capabilities.prompts) {
    for (const p of await quiet("prompts/list", ops.listPrompts)) {
      await quiet(`prompts/get ${p.name}`, () => ops.getPrompt(p.name));
    }
  }
  return failures;
}

/// Run a command; resolves with {code, stdout, stderr}.
function run(cmd, args, opts = {}) {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { stdio: ["ignore", "pipe", "pipe"], ...opts });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    child.on("error", (e) => resolve({ code: 2, stdout, stderr: `${stderr}${e}` }));
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

// --- the Skills extension ----------------------------------------------------------------------

const SKILL = "pdf-processing";
const FILE = "references/FORMS.md";
/// The refusal each verify scenario must get from `sluice client` (its stderr line).
const REFUSALS = {
  "sep-2640-client-verify-size": /^sluice client: skill pdf-processing: SKILL\.md is \d+ bytes, its entry says \d+: not used$/m,
  "sep-2640-client-verify-digest": /^sluice client: skill pdf-processing: SKILL\.md has digest sha256:[0-9a-f]{64}, its entry says sha256:[0-9a-f]{64}: not used$/m,
  "sep-2640-client-verify-frontmatter": /^sluice client: skill pdf-processing: SKILL\.md's frontmatter differs from its entry: .+: not used$/m,
};
const skillsScenario = scenario.startsWith("sep-2640-client-");

/// The skills scenarios with `sluice client`.
async function skillsViaSluiceClient(base) {
  if (scenario === "sep-2640-client-no-prefetch") {
    const done = await run(sluice, [...base, "skills"]);
    if (done.stderr.trim()) log(`sluice client skills: ${done.stderr.trim()}`);
    if (done.code !== 0) return [`sluice client skills exited ${done.code}`];
    const names = JSON.parse(done.stdout).skills.map((s) => s.frontmatter?.name);
    log(`skills: ${names.join(", ") || "(none)"}`);
    return names.includes(SKILL) ? [] : [`skills/list did not list ${SKILL}`];
  }
  const refusal = REFUSALS[scenario];
  if (!refusal) return [`no exercise for the scenario ${scenario}`];
  const done = await run(sluice, [...base, "skill", SKILL, FILE]);
  log(`sluice client skill ${SKILL} ${FILE} exited ${done.code}: ${done.stderr.trim()}`);
  if (done.code === 0) return [`sluice client used the tampered skill (it printed ${FILE})`];
  if (done.code === 1 && refusal.test(done.stderr)) return [];
  return [`sluice client did not refuse with the verification failure ${refusal}`];
}

/// The skills scenarios through the gateway: raw requests, no verifying here (the gateway's
/// upstream side must refuse the tampered SKILL.md).
async function skillsViaGateway(client, timeout) {
  const raw = (method, params) => client.request({ method, params }, ResultSchema, timeout);
  const skills = [];
  let cursor;
  for (let i = 0; i < 100; i++) {
    const page = await raw("skills/list", cursor ? { cursor } : {});
    skills.push(...(page.skills ?? []));
    cursor = page.nextCursor;
    if (!cursor) break;
  }
  log(`skills: ${skills.map((s) => s.uri).join(", ") || "(none)"}`);
  const skill = skills.find((s) => s.uri?.endsWith(`/${SKILL}/SKILL.md`));
  if (!skill) return [`the gateway's skills/list has no ${SKILL}`];
  if (scenario === "sep-2640-client-no-prefetch") return [];
  const forms = Array.isArray(skill.resources)
    ? skill.resources.find((r) => r.uri?.endsWith(`/${FILE}`))?.uri
    : undefined;
  try {
    await client.readResource({ uri: skill.uri }, timeout);
  } catch (e) {
    if (e instanceof McpError) {
      log(`resources/read ${skill.uri}: refused: ${e.message}`);
      return [];
    }
    throw e;
  }
  const next = forms ?? skill.uri.replace(/SKILL\.md$/, FILE);
  await client.readResource({ uri: next }, timeout).catch(() => {});
  return [`the gateway served the tampered ${skill.uri} (and ${next} was read after it)`];
}

// --- `sluice client` ---------------------------------------------------------------------------

async function viaSluiceClient() {
  const base = ["client", "--era", stateless ? "stateless" : "handshake", "--elicit", "defaults",
    "--output", "json", "--timeout", "20", "--no-oauth", url];
  if (skillsScenario) return skillsViaSluiceClient(base);
  const sluiceJson = async (...args) => {
    const done = await run(sluice, [...base, ...args]);
    if (done.stderr.trim()) log(`sluice client ${args[0]}: ${done.stderr.trim()}`);
    // Exit status 1: the server answered with an error; 2: no answer (usage, connection).
    if (done.code !== 0) {
      const E = done.code === 1 ? RpcError : Error;
      throw new E(`sluice client ${args.join(" ")} exited ${done.code}`);
    }
    return JSON.parse(done.stdout);
  };
  return exercise(
    {
      capabilities: async () => (await sluiceJson("info")).capabilities,
      listTools: async () => (await sluiceJson("tools")).tools,
      callTool: (name, args) => sluiceJson("call", name, "--json", JSON.stringify(args)),
      listResources: async () => (await sluiceJson("resources")).resources,
      readResource: (uri) => sluiceJson("read", uri),
      listPrompts: async () => (await sluiceJson("prompts")).prompts,
      getPrompt: (name) => sluiceJson("prompt", name),
    },
    (name) => name,
  );
}

// --- the gateway --------------------------------------------------------------------------------

function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

let serveLogTail = "";

async function viaGateway() {
  const home = mkdtempSync(join(tmpdir(), "sluice-conformance-"));
  // The test hands out the gateway's ports (SLUICE_GATEWAY_PORTS=LISTEN,ADMIN: ports no other
  // test is given); run by hand, any free ones.
  const given = (process.env.SLUICE_GATEWAY_PORTS ?? "").split(",").filter(Boolean).map(Number);
  const [port, admin] = given.length === 2 ? given : [await freePort(), await freePort()];
  writeFileSync(join(home, "sluice.json"), JSON.stringify({
    listen: `127.0.0.1:${port}`, admin: `127.0.0.1:${admin}`,
    restart_initial_ms: 100, restart_max_ms: 400,
  }));
  mkdirSync(join(home, "mcp"));
  writeFileSync(join(home, "mcp", "expose.json"), JSON.stringify({
    version: 1,
    upstreams: [{ id: "remote", transport: "http", url, era: stateless ? "stateless" : "handshake",
      expose_all: true }],
  }));
  const gateway = spawn(sluice, ["serve", "--home", home], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  let serveLog = "";
  gateway.stderr.on("data", (d) => (serveLog += d));
  const stop = () => gateway.kill("SIGTERM");
  try {
    // Ready when every upstream is up (bounded: 15 s).
    let ready = false;
    for (let i = 0; i < 150 && !ready && gateway.exitCode === null; i++) {
      try {
        ready = (await fetch(`http://127.0.0.1:${admin}/readyz`)).ok;
      } catch {}
      if (!ready) await sleep(100);
    }
    if (!ready) throw new Error("the gateway did not become ready in 15 s");

    const client = new Client(
      { name: "sluice-conformance-driver", version: "1.0.0" },
      { capabilities: { elicitation: { form: { applyDefaults: true } } } },
    );
    client.setRequestHandler(ElicitRequestSchema, async () => ({ action: "accept", content: {} }));
    const transport = new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`));
    await client.connect(transport);
    const all = async (f, key) => {
      const out = [];
      let cursor;
      for (let i = 0; i < 100; i++) {
        const page = await f(cursor ? { cursor } : undefined);
        out.push(...page[key]);
        cursor = page.nextCursor;
        if (!cursor) break;
      }
      return out;
    };
    const timeout = { timeout: 30000 };
    try {
      if (skillsScenario) return await skillsViaGateway(client, timeout);
      return await exercise(
        {
          capabilities: async () => client.getServerCapabilities(),
          listTools: () => all((p) => client.listTools(p, timeout), "tools"),
          callTool: async (name, args) => {
            let r;
            try {
              r = await client.callTool({ name, arguments: args }, undefined, timeout);
            } catch (e) {
              throw e instanceof McpError ? new RpcError(e.message) : e;
            }
            if (r.isError) throw new RpcError(JSON.stringify(r.content));
            return r;
          },
          listResources: () => all((p) => client.listResources(p, timeout), "resources"),
          readResource: (uri) => client.readResource({ uri }, timeout),
          listPrompts: () => all((p) => client.listPrompts(p, timeout), "prompts"),
          getPrompt: (name) => client.getPrompt({ name }, timeout),
        },
        // The gateway's own tools (none here) are not the scenario's.
        (name) => (name.startsWith("remote_") ? name.slice("remote_".length) : null),
      );
    } finally {
      await transport.close().catch(() => {});
    }
  } finally {
    stop();
    serveLogTail = serveLog.split("\n").slice(-30).join("\n");
    if (process.env.SLUICE_KEEP_HOME) {
      log(`the gateway's home: ${home}`);
    } else {
      rmSync(home, { recursive: true, force: true });
    }
  }
}

let failures;
try {
  failures = mode === "client" ? await viaSluiceClient() : await viaGateway();
} catch (e) {
  failures = [String(e.stack ?? e)];
}
for (const f of failures) log(`FAILED ${f}`);
if (failures.length && serveLogTail) log(`sluice serve's log (last lines):\n${serveLogTail}`);
process.exit(failures.length ? 1 : 0);
