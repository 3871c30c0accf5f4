#!/usr/bin/env node
// Drives Sluice's admin page in headless Chromium (Debian's /usr/bin/chromium, through
// playwright-core), with a real MCP client (the TypeScript SDK) making the traffic it watches.
// Used by tests/e2e/admin.rs.
//
//   ADMIN_URL=http://127.0.0.1:P TOKEN=… MCP_URL=http://127.0.0.1:Q/mcp SHOTS=DIR node admin-browser.mjs
//
// Checks, in order: the page loads with the token; a tool call appears in Live traffic with its
// hook decisions; disabling a tool on the Tools page changes the connected client's tools/list;
// a curated tool its upstream changed is flagged with its diff and Approve clears it; "Try it" on a hook shows its decision; and a screenshot of each page is written to SHOTS.
// Exits 0 when every check passed, 1 (with the reason on stderr) otherwise.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { openChromium } from './chromium.mjs';

const { ADMIN_URL, TOKEN, MCP_URL, SHOTS } = process.env;
if (!ADMIN_URL || !TOKEN || !MCP_URL || !SHOTS) {
  console.error('set ADMIN_URL, TOKEN, MCP_URL and SHOTS');
  process.exit(2);
}
mkdirSync(SHOTS, { recursive: true });
const step = (s) => console.log('step: ' + s);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const api = async (path) => {
  const r = await fetch(ADMIN_URL + path, { headers: { authorization: 'Bearer ' + TOKEN } });
  if (!r.ok) throw new Error(`GET ${path}: HTTP ${r.status}`);
  return r.json();
};

const deadline = setTimeout(() => { console.error('the browser test ran out of time (120 s)'); process.exit(1); }, 120_000);

let browser;
let client;
try {
  browser = await openChromium({ width: 1360, height: 860 });
  const { page, problems } = browser;
  const shot = (name) => page.screenshot({ path: join(SHOTS, name + '.png'), fullPage: true });
  const nav = async (name) => { await page.click(`#nav button[data-page="${name}"]`); };

  step('load the page with the token');
  await page.goto(ADMIN_URL + '/#token=' + TOKEN);
  await page.waitForSelector('#app:not([hidden])', { timeout: 15_000 });
  await page.waitForSelector('#ov-upstreams tr[data-upstream="fx"]');
  if (page.url().includes(TOKEN)) throw new Error('the token stays in the address bar');

  step('connect an MCP client');
  client = new Client({ name: 'browser-test-client', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(MCP_URL)));
  const names = async () => (await client.listTools()).tools.map((t) => t.name);
  if (!(await names()).includes('fx_echo')) throw new Error('fx_echo is not listed at the start');

  step('a tool call appears in Live traffic with its hook decisions');
  await nav('traffic');
  await page.waitForSelector('#conn.live');
  await client.callTool({ name: 'fx_echo', arguments: { greeting: 'hello from the browser test' } });
  const refused = await client.callTool({ name: 'fx_add', arguments: { a: 1, b: 2 } }).catch((e) => e);
  if (!(refused instanceof Error) || !String(refused.message).includes('Request rejected')) {
    throw new Error('fx_add was not refused by the hook: ' + JSON.stringify(refused));
  }
  const echoRow = page.locator('#traffic-rows tr[data-tool="fx_echo"]').first();
  await echoRow.waitFor({ timeout: 10_000 });
  const echoText = await echoRow.innerText();
  for (const want of ['fx_echo', 'fx', 'ok', 'pass', 'watch-all', 'browser-test-client']) {
    if (!echoText.includes(want)) throw new Error(`the fx_echo row lacks ${want}: ${echoText}`);
  }
  const addRow = page.locator('#traffic-rows tr[data-tool="fx_add"]').first();
  await addRow.waitFor({ timeout: 10_000 });
  const addText = await addRow.innerText();
  for (const want of ['refused', 'refuse', 'no-add', 'no adding']) {
    if (!addText.includes(want)) throw new Error(`the fx_add row lacks ${want}: ${addText}`);
  }
  await page.fill('#traffic-filter', 'fx_add');
  if (await echoRow.isVisible()) throw new Error('the filter did not hide the fx_echo row');
  await page.fill('#traffic-filter', '');
  await shot('traffic');

  step('disable a tool and see the client\'s tools/list change');
  await nav('tools');
  const toolRow = page.locator('#tools-rows tr[data-tool="fx_echo"]');
  await toolRow.waitFor();
  await page.fill('#tools-search', 'echo');
  await toolRow.locator('button.toggle').click();
  await page.waitForSelector('#tools-rows tr[data-tool="fx_echo"] button.toggle:text("Enable")');
  let gone = false;
  for (let i = 0; i < 50 && !gone; i++) {
    gone = !(await names()).includes('fx_echo');
    if (!gone) await sleep(100);
  }
  if (!gone) throw new Error('fx_echo is still in the client\'s tools/list after disabling it');
  if ((await page.locator('#tools-error').innerText()).trim()) throw new Error('the Tools page shows an error');
  await page.fill('#tools-search', '');

  step('a curated tool whose upstream changed it is flagged with its diff, and approving it clears the flag');
  const drifted = page.locator('#tools-rows tr[data-tool="simple_text"]');
  await drifted.locator('.badge.drifted').waitFor();
  if ((await drifted.locator('.badge.drifted').innerText()).trim() !== 'changed') throw new Error('simple_text is not flagged as changed');
  await drifted.locator('details.pin-diff summary').click();
  const diff = await drifted.locator('pre.diff').innerText();
  if (!diff.includes('-  "description": "An older description."') || !diff.includes('+  "description": "Tests simple text content response"')) throw new Error('the diff is not the change: ' + diff);
  await shot('tools');
  await drifted.locator('button.approve').click();
  await page.waitForSelector('#tools-rows tr[data-tool="simple_text"] button.toggle');
  for (let i = 0; i < 50 && (await drifted.locator('.badge.drifted').count()) > 0; i++) await sleep(100);
  if ((await drifted.locator('.badge.drifted').count()) > 0) throw new Error('simple_text is still flagged after Approve');
  const listed = (await api('/api/tools')).tools.find((t) => t.name === 'simple_text');
  if (!listed || listed.drifted !== false || listed.pin !== 'pinned') throw new Error('the API still reports simple_text as changed: ' + JSON.stringify(listed));
  if ((await page.locator('#tools-error').innerText()).trim()) throw new Error('the Tools page shows an error after Approve');

  step('try a hook');
  await nav('hooks');
  await page.locator('#hooks-rows tr[data-hook="no-add"] button.try').click();
  await page.fill('#try-tool', 'fx_add');
  await page.fill('#try-args', '{"a": 2, "b": 2}');
  await page.click('#try-run');
  await page.waitForSelector('#try-result .decision');
  const tryText = await page.locator('#try-result').innerText();
  if (!tryText.includes('refuse') || !tryText.includes('no adding')) throw new Error('try it: ' + tryText);
  await shot('hooks');

  step('upstreams, with the stderr tail');
  await nav('upstreams');
  await page.locator('#upstreams-rows tr[data-upstream="fx"] button.stderr').click();
  await page.waitForSelector('#stderr-tail');
  await shot('upstreams');

  step('logs');
  await nav('logs');
  await page.waitForSelector('#logs-rows tr', { timeout: 10_000 });
  await page.fill('#logs-form input[name="tool"]', 'fx_add');
  await page.click('#logs-form button[type="submit"]');
  await page.waitForFunction(() => {
    const rows = [...document.querySelectorAll('#logs-rows tr')];
    return rows.length > 0 && rows.every((r) => r.innerText.includes('fx_add'));
  });
  await shot('logs');

  step('overview');
  await nav('overview');
  await page.waitForFunction(() => document.querySelector('#ov-total').textContent.startsWith('2'));
  await shot('overview');

  if (problems.length) throw new Error(problems.join('\n'));
  console.log('admin page: every check passed');
} catch (e) {
  console.error('admin page test failed: ' + (e && e.stack || e));
  process.exitCode = 1;
} finally {
  clearTimeout(deadline);
  if (client) await client.close().catch(() => {});
  if (browser) await browser.close();
}
