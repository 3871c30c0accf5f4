// A small stdio MCP server for the sandbox tests (tests/e2e/sandbox.rs): tools that try what a
// sandbox refuses. Plain JSON lines and Node's own modules only, so it needs nothing but the node
// binary and this file to be readable.
//
//   connect {host, port}    opens a TCP connection: "connected", or the error code
//   self_connect            listens on 127.0.0.1 and connects to itself: "connected", or the
//                           error code
//   read {path}             reads a file: its text, or the error code
//   hog {mb}                allocates 16 MiB buffers up to mb: how far it got
//   fork_bomb {seconds}     runs a shell fork bomb in this server's process group for that
//                           long, counting its processes; then kills them. Refuses to run
//                           unless RLIMIT_NPROC is set (it must only ever run sandboxed)
//   spin {seconds}          burns that much CPU time (at most 50 s of wall time): "spun",
//                           unless the kernel stops it first
//   signal {pid}            sends signal 0 to a process: "sent", or the error code
//   whoami                  pid, uid and the limits it runs under
import { spawn } from "node:child_process";
import { readFileSync, readdirSync } from "node:fs";
import net from "node:net";
import readline from "node:readline";

const tools = ["connect", "self_connect", "read", "hog", "fork_bomb", "spin", "signal", "whoami"].map((name) => ({
  name,
  inputSchema: { type: "object" },
}));

const text = (t, isError = false) => ({ content: [{ type: "text", text: t }], isError });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function limits() {
  const out = {};
  for (const line of readFileSync("/proc/self/limits", "utf8").split("\n")) {
    const m = line.match(/^(Max [a-z ]+?)\s{2,}(\S+)\s+(\S+)/);
    if (m) out[m[1]] = m[2];
  }
  return out;
}

function connect({ host, port }) {
  return new Promise((resolve) => {
    const s = net.connect({ host, port });
    s.setTimeout(3000);
    s.on("connect", () => { s.destroy(); resolve(text("connected")); });
    s.on("timeout", () => { s.destroy(); resolve(text("ETIMEDOUT", true)); });
    s.on("error", (e) => resolve(text(e.code || e.message, true)));
  });
}

function selfConnect() {
  return new Promise((resolve) => {
    const server = net.createServer((s) => s.destroy());
    server.on("error", (e) => resolve(text(e.code || e.message, true)));
    server.listen(0, "127.0.0.1", () => {
      connect({ host: "127.0.0.1", port: server.address().port }).then((r) => {
        server.close();
        resolve(r);
      });
    });
  });
}

/** Processes whose process group is `pgid` (read from /proc), but this one. */
function members(pgid) {
  const out = [];
  for (const pid of readdirSync("/proc")) {
    if (!/^\d+$/.test(pid) || Number(pid) === process.pid) continue;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(fields[2]) === pgid) out.push(Number(pid));
    } catch {}
  }
  return out;
}

// The bomb stays in this server's process group (it leads it: the gateway started it so), so
// that stopping the upstream stops the bomb too, whatever happens to this call.
async function forkBomb({ seconds = 2 }) {
  if (limits()["Max processes"] === "unlimited") {
    return text("refused: RLIMIT_NPROC is not set, this would take the machine down", true);
  }
  const pgid = process.pid;
  spawn("sh", ["-c", "b() { b | b & }; b; sleep 60"], { stdio: "ignore" });
  let max = 0;
  const end = Date.now() + seconds * 1000;
  while (Date.now() < end) {
    max = Math.max(max, members(pgid).length);
    await sleep(50);
  }
  for (let i = 0; i < 200; i++) {
    const left = members(pgid);
    if (left.length === 0) break;
    for (const pid of left) {
      try { process.kill(pid, "SIGKILL"); } catch {}
    }
    await sleep(10);
  }
  return text(JSON.stringify({ max_processes: max, left: members(pgid).length }));
}

function hog({ mb }) {
  const held = [];
  let got = 0;
  try {
    while (got < mb) {
      held.push(Buffer.alloc(16 << 20, 1));
      got += 16;
    }
  } catch (e) {
    return text(JSON.stringify({ allocated_mb: got, error: e.message }), true);
  }
  return text(JSON.stringify({ allocated_mb: got }));
}

async function call(name, args) {
  switch (name) {
    case "connect": return connect(args);
    case "self_connect": return selfConnect();
    case "read":
      try { return text(readFileSync(args.path, "utf8")); } catch (e) { return text(e.code || e.message, true); }
    case "hog": return hog(args);
    case "fork_bomb": return forkBomb(args);
    case "signal":
      try { process.kill(args.pid, 0); return text("sent"); } catch (e) { return text(e.code || e.message, true); }
    case "spin": {
      const want = (args.seconds ?? 1) * 1e6;
      const end = Date.now() + 50_000;
      const cpu = () => { const u = process.cpuUsage(); return u.user + u.system; };
      const start = cpu();
      while (cpu() - start < want && Date.now() < end) {}
      return text("spun");
    }
    case "whoami":
      return text(JSON.stringify({ pid: process.pid, uid: process.getuid(), limits: limits() }));
    default: return text(`unknown tool ${name}`, true);
  }
}

const send = (msg) => process.stdout.write(JSON.stringify(msg) + "\n");
readline.createInterface({ input: process.stdin }).on("line", async (line) => {
  let msg;
  try { msg = JSON.parse(line); } catch { return; }
  if (msg.id === undefined || !msg.method) return;
  const reply = (result) => send({ jsonrpc: "2.0", id: msg.id, result });
  switch (msg.method) {
    case "initialize":
      return reply({
        protocolVersion: msg.params?.protocolVersion ?? "2025-06-18",
        capabilities: { tools: {} },
        serverInfo: { name: "sandbox-probe", version: "1" },
      });
    case "ping": return reply({});
    case "tools/list": return reply({ tools });
    case "tools/call": return reply(await call(msg.params.name, msg.params.arguments ?? {}));
    default:
      return send({ jsonrpc: "2.0", id: msg.id, error: { code: -32601, message: "Method not found" } });
  }
});
