// Shared harness of the browser scenarios: launches Debian's chromium through
// playwright-core (never a downloaded browser), opens pages on the server under test,
// records every command part's status transitions, saves screenshots, and turns any
// failure (assertion, timeout, uncaught page error) into exit status 1.
//
// Usage: node tests/ui/<scenario>.mjs <base_url> <screenshot_dir> <work_dir>

import { chromium } from 'playwright-core';
import path from 'node:path';

export const [base, shotsDir, workDir] = process.argv.slice(2);

if (!base || !shotsDir) {
  console.error('usage: node <scenario>.mjs <base_url> <screenshot_dir> [work_dir]');
  process.exit(2);
}

/** Throws unless `cond`. */
export function assert(cond, message) {
  if (!cond) throw new Error(`assertion failed: ${message}`);
}

export function assertEqual(actual, expected, message) {
  const a = JSON.stringify(actual);
  const e = JSON.stringify(expected);
  if (a !== e) throw new Error(`assertion failed: ${message}\n  expected: ${e}\n  actual:   ${a}`);
}

// Records, per command part, the statuses it showed, in order (installed before the
// page's own scripts run). Parts are keyed by their element, reported by commandId.
const RECORDER = () => {
  const seen = new Map();
  window.__statusLog = [];
  const entry = (el) => {
    let e = seen.get(el);
    if (!e) {
      e = { commandId: el.dataset.commandId, statuses: [] };
      seen.set(el, e);
      window.__statusLog.push(e);
    }
    return e;
  };
  const push = (e, status) => {
    if (status && e.statuses[e.statuses.length - 1] !== status) e.statuses.push(status);
  };
  const isPart = (n) => n.nodeType === 1 && n.dataset && n.dataset.testid === 'tool-part';
  new MutationObserver((records) => {
    // A batch may hold several changes of one part: the old values give the sequence,
    // the current value ends it.
    const touched = new Set();
    for (const r of records) {
      if (r.type === 'attributes' && isPart(r.target)) {
        const e = entry(r.target);
        push(e, r.oldValue);
        touched.add(r.target);
      }
      for (const n of r.addedNodes || []) {
        if (n.nodeType !== 1) continue;
        const found = isPart(n) ? [n] : [...n.querySelectorAll('[data-testid="tool-part"]')];
        for (const p of found) {
          entry(p);
          touched.add(p);
        }
      }
    }
    for (const el of touched) push(entry(el), el.dataset.status);
  }).observe(document, {
    subtree: true, childList: true, attributes: true, attributeOldValue: true, attributeFilter: ['data-status'],
  });
};

/**
 * Runs `body({ browser, newPage, shot, api })`, exits 0 on success, 1 on failure (after
 * a `<name>-failure.png` of every open page).
 */
export async function scenario(name, body) {
  const started = Date.now();
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'],
  });
  const pages = [];
  const problems = [];
  const newPage = async ({ width = 1280, height = 860, colorScheme = 'light', url = base } = {}) => {
    const context = await browser.newContext({ viewport: { width, height }, colorScheme, deviceScaleFactor: 1 });
    const page = await context.newPage();
    page.setDefaultTimeout(15000);
    await page.addInitScript(RECORDER);
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
    page.on('console', (msg) => {
      // Chromium logs every non-2xx fetch ("Failed to load resource"): expected for 409s.
      if (msg.type() === 'error' && !/Failed to load resource/.test(msg.text())) {
        problems.push(`console error: ${msg.text()}`);
      }
    });
    await page.goto(url);
    await page.waitForSelector('body[data-ready="true"]');
    pages.push(page);
    return page;
  };
  const shot = async (page, label) => {
    const file = path.join(shotsDir, `${name}-${label}.png`);
    await page.screenshot({ path: file, fullPage: false });
    console.log(`screenshot: ${file}`);
  };
  const api = async (method, route, body) => {
    const response = await fetch(new URL(route, base), {
      method,
      headers: body === undefined ? {} : { 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    let json = null;
    try {
      json = JSON.parse(text);
    } catch {
      // SSE or empty
    }
    return { status: response.status, json, text };
  };
  let code = 0;
  try {
    await body({ browser, newPage, shot, api });
    if (problems.length) throw new Error(`the page reported problems:\n${problems.join('\n')}`);
    console.log(`ok: ${name} (${((Date.now() - started) / 1000).toFixed(1)} s)`);
  } catch (e) {
    code = 1;
    console.error(`FAILED: ${name}: ${e.stack || e}`);
    if (problems.length) console.error(problems.join('\n'));
    for (const [k, page] of pages.entries()) {
      try {
        const file = path.join(shotsDir, `${name}-failure-${k}.png`);
        await page.screenshot({ path: file });
        console.error(`failure screenshot: ${file}`);
      } catch {
        // the page may be gone
      }
    }
  } finally {
    await browser.close().catch(() => {});
  }
  process.exit(code);
}

// ---------------------------------------------------------------------------------------
// Page helpers

export const T = (id) => `[data-testid="${id}"]`;

/** Types a message and sends it with the Send button. */
export async function sendMessage(page, text) {
  await page.fill(T('message-input'), text);
  await page.click(T('send-button'));
}

/** Waits until no run is active (the Send button is back). */
export async function waitIdle(page, timeout = 20000) {
  await page.waitForSelector(`${T('send-button')}:not([hidden])`, { timeout });
  await page.waitForSelector(`${T('stop-button')}[hidden]`, { state: 'attached', timeout });
}

/** Every command part in the transcript: id, command, status, output, meta. */
export async function parts(page) {
  return page.$$eval(T('tool-part'), (els) => els.map((el) => ({
    commandId: el.dataset.commandId,
    command: el.querySelector('[data-testid="tool-command"]').textContent,
    status: el.dataset.status,
    output: el.querySelector('[data-testid="tool-output"]').textContent,
    meta: el.querySelector('[data-testid="tool-meta"]').textContent,
    collapsed: el.dataset.collapsed,
  })));
}

/** The statuses each part went through (from the recorder), in creation order. */
export async function statusLog(page) {
  return page.evaluate(() => window.__statusLog.map((e) => ({ ...e, statuses: [...e.statuses] })));
}

/** The transcript as a list of `role: text` lines (roles from the bubble kinds). */
export async function transcript(page) {
  return page.$$eval('[data-testid="turns"] > *', (els) => els.map((el) => {
    const kind = el.dataset.testid || el.className;
    return { kind, text: el.innerText.trim() };
  }));
}

/** Clicks "New conversation" and waits for the empty state. */
export async function newConversation(page) {
  await page.click(T('new-conversation'));
  await page.waitForSelector(T('empty-state'));
}

/** The conversation id in the page's location (`#agent=…&c=<id>`). */
export async function conversationId(page) {
  return page.evaluate(() => new URLSearchParams(location.hash.slice(1)).get('c'));
}

/** The last bubble element handle of a kind (`msg-assistant`, `msg-user`, `msg-tool`). */
export async function lastOf(page, kind) {
  const all = await page.$$(`[data-testid="${kind}"]`);
  assert(all.length > 0, `no ${kind} in the page`);
  return all[all.length - 1];
}
