#!/usr/bin/env node
// Drives the admin page's Connections view in headless Chromium (Debian's /usr/bin/chromium,
// through playwright-core). Used by tests/e2e/oauth/connections.rs.
//
//   ADMIN_URL=http://127.0.0.1:P TOKEN=… UPSTREAM=remote PRINCIPAL=token:bob SHOTS=DIR node admin-connections.mjs
//
// Checks: the view lists PRINCIPAL's connection to UPSTREAM (expiry, scopes) and no other;
// Revoke (confirmed) removes the row, and the API then lists no one; the page shows no error
// and no failed request. A screenshot of the view is written to SHOTS/connections.png.
// Exits 0 when every check passed, 1 (with the reason on stderr) otherwise.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { openChromium } from './chromium.mjs';

const { ADMIN_URL, TOKEN, UPSTREAM, PRINCIPAL, SHOTS } = process.env;
if (!ADMIN_URL || !TOKEN || !UPSTREAM || !PRINCIPAL || !SHOTS) {
  console.error('set ADMIN_URL, TOKEN, UPSTREAM, PRINCIPAL and SHOTS');
  process.exit(2);
}
mkdirSync(SHOTS, { recursive: true });
const step = (s) => console.log('step: ' + s);

const deadline = setTimeout(() => { console.error('the browser test ran out of time (90 s)'); process.exit(1); }, 90_000);
let browser;
try {
  browser = await openChromium({ width: 1360, height: 700 });
  const { page, problems } = browser;
  const asked = [];
  page.on('dialog', (d) => { asked.push(d.message()); d.accept(); });

  step('load the page and open Connections');
  await page.goto(ADMIN_URL + '/#token=' + TOKEN);
  await page.waitForSelector('#app:not([hidden])', { timeout: 15_000 });
  await page.click('#nav button[data-page="connections"]');
  const row = page.locator(`#connections-rows tr.connection[data-upstream="${UPSTREAM}"][data-principal="${PRINCIPAL}"]`);
  await row.waitFor({ timeout: 10_000 });
  const rows = await page.locator('#connections-rows tr.connection').count();
  if (rows !== 1) throw new Error(`expected one connection, the view lists ${rows}`);
  const text = await row.innerText();
  for (const want of [UPSTREAM, PRINCIPAL, 'in ', 'Revoke']) {
    if (!text.includes(want)) throw new Error(`the row lacks ${want}: ${text}`);
  }
  await page.screenshot({ path: join(SHOTS, 'connections.png'), fullPage: true });

  step('revoke it');
  await row.locator('button.revoke').click();
  await page.waitForSelector(`#connections-rows tr[data-upstream="${UPSTREAM}"]:not(.connection)`, { timeout: 10_000 });
  if ((await row.count()) !== 0) throw new Error('the row is still listed after Revoke');
  if (!asked.length || !asked[0].includes(PRINCIPAL)) throw new Error('Revoke did not ask first: ' + JSON.stringify(asked));
  const r = await fetch(ADMIN_URL + '/api/connections', { headers: { authorization: 'Bearer ' + TOKEN } });
  const d = await r.json();
  const left = d.upstreams.flatMap((u) => u.principals);
  if (left.length) throw new Error('the API still lists ' + JSON.stringify(left));
  if ((await page.locator('#connections-error').innerText()).trim()) throw new Error('the view shows an error');

  if (problems.length) throw new Error(problems.join('\n'));
  console.log('connections view: every check passed');
} catch (e) {
  console.error('connections view test failed: ' + (e && e.stack || e));
  process.exitCode = 1;
} finally {
  clearTimeout(deadline);
  if (browser) await browser.close();
}
