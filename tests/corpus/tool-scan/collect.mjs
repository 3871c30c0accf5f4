// Lists what real MCP servers offer (tools, prompts, resources, resource templates) and writes
// one JSON file per server into negatives/: the false-positive half of the tool-scan corpus.
//
// Run from tests/node (its node_modules has the MCP TypeScript SDK):
//   PATH=<the servers' bin folders>:$PATH CORPUS_WORK=/tmp/corpus-work \
//     node ../corpus/tool-scan/collect.mjs ../corpus/tool-scan/servers.json
// servers.json: [{"registry": "npm"|"pypi", "package", "version", "command", "args"?, "env"?}],
// `WORK` in an argument or a value standing for CORPUS_WORK (a scratch folder, also the servers'
// HOME). Each server is installed beforehand at that exact version (`npm install
// --ignore-scripts`, a virtual environment per PyPI package); the environment values are
// placeholders (no server is given a real key or reaches a network service while it lists).
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

// The SDK of the working directory's node_modules (tests/node).
const sdk = (p) => import(pathToFileURL(createRequire(join(process.cwd(), "x.js")).resolve(p)).href);
const { Client } = await sdk("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = await sdk("@modelcontextprotocol/sdk/client/stdio.js");

const out = join(dirname(fileURLToPath(import.meta.url)), "negatives");
const work = process.env.CORPUS_WORK ?? join(tmpdir(), "corpus-work");
const local = (v) => v.replaceAll("WORK", work);
const servers = JSON.parse(readFileSync(process.argv[2], "utf8"));

async function all(list, key) {
  const items = [];
  let cursor;
  do {
    const page = await list(cursor ? { cursor } : undefined);
    items.push(...page[key]);
    cursor = page.nextCursor;
  } while (cursor);
  return items;
}

for (const s of servers) {
  const slug = `${s.registry}-${s.package.replace(/^@/, "").replace(/[/.]/g, "-")}`;
  const client = new Client({ name: "sluice-corpus", version: "0" });
  const transport = new StdioClientTransport({
    command: s.command,
    args: (s.args ?? []).map(local),
    env: {
      PATH: process.env.PATH,
      HOME: work,
      ...Object.fromEntries(Object.entries(s.env ?? {}).map(([k, v]) => [k, local(v)])),
    },
    stderr: "ignore",
  });
  let timer;
  try {
    timer = setTimeout(() => { console.error(`${slug}: timed out`); process.exit(2); }, 120000);
    await client.connect(transport);
    const caps = client.getServerCapabilities() ?? {};
    const rec = {
      source: { registry: s.registry, package: s.package, version: s.version },
      server: client.getServerVersion(),
      tools: caps.tools ? await all((p) => client.listTools(p), "tools") : [],
      prompts: caps.prompts ? await all((p) => client.listPrompts(p), "prompts") : [],
      resources: caps.resources ? await all((p) => client.listResources(p), "resources").catch(() => []) : [],
      resourceTemplates: caps.resources
        ? await all((p) => client.listResourceTemplates(p), "resourceTemplates").catch(() => [])
        : [],
    };
    writeFileSync(join(out, `${slug}.json`), JSON.stringify(rec, null, 2) + "\n");
    console.log(`${slug}: ${rec.tools.length} tools, ${rec.prompts.length} prompts, ${rec.resources.length} resources, ${rec.resourceTemplates.length} templates`);
  } catch (e) {
    console.error(`${slug}: ${e.message}`);
  } finally {
    clearTimeout(timer);
    await client.close().catch(() => {});
  }
}
