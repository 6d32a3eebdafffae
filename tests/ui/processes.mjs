// The processes panel: a background process started through REST is listed (running),
// its output tails live (SSE from an offset), a line typed in the input box reaches it,
// the tail resumes after the network drops (no line lost or repeated), and Stop ends it
// (state exited, also through the API). Then the agent starts one in a conversation:
// the panel refreshes and opens by itself, showing that conversation's processes only.

import {
  scenario, assert, assertEqual, T, sendMessage, waitIdle,
} from './lib.mjs';

const COMMAND = 'i=0; (while :; do i=$((i+1)); echo "tick $i"; sleep 0.2; done) & while read l; do echo "got $l"; done';

/** The highest `tick N` in the panel's output. */
async function lastTick(page) {
  return page.$eval(T('process-output'), (el) => {
    const ticks = [...el.textContent.matchAll(/^tick (\d+)$/gm)].map((m) => Number(m[1]));
    return ticks.length ? Math.max(...ticks) : 0;
  });
}

/** Waits until the output shows a tick above `n`. */
async function tickAbove(page, n) {
  await page.waitForFunction((above) => {
    const text = document.querySelector('[data-testid="process-output"]').textContent;
    return [...text.matchAll(/^tick (\d+)$/gm)].some((m) => Number(m[1]) > above);
  }, n);
}

/** Every tick shown exactly once and in order, from 1. */
async function ticksInOrder(page) {
  const ticks = await page.$eval(T('process-output'), (el) => [...el.textContent.matchAll(/^tick (\d+)$/gm)].map((m) => Number(m[1])));
  assert(ticks.length > 0, 'some ticks');
  assertEqual(ticks, ticks.map((_, k) => k + 1), 'each tick once, in order');
}

scenario('processes', async ({ newPage, shot, api }) => {
  const started = await api('POST', 'processes', { command: COMMAND, yield_ms: 300 });
  assertEqual(started.status, 200, `start: ${started.text}`);
  const id = started.json.processId;
  assert(id, `a processId: ${started.text}`);

  const page = await newPage();
  // A way to cut the page's SSE streams as a dropped network would (Chromium's offline
  // emulation leaves open streams alone): every streamed response body is relayed
  // through a stream the test can fail.
  await page.addInitScript(() => {
    const fetch = window.fetch;
    const relays = [];
    window.fetch = async (...args) => {
      const response = await fetch(...args);
      if (!String(args[0]).includes('stream=true')) return response;
      const reader = response.body.getReader();
      const body = new ReadableStream({
        start(controller) { relays.push({ controller, reader }); },
        async pull(controller) {
          try {
            const { value, done } = await reader.read();
            if (done) controller.close(); else controller.enqueue(value);
          } catch {
            // cut below
          }
        },
      });
      return new Response(body, { status: response.status, headers: response.headers });
    };
    window.__cutStreams = () => {
      for (const { controller, reader } of relays.splice(0)) {
        controller.error(new TypeError('network error'));
        reader.cancel();
      }
    };
  });
  await page.reload();
  await page.waitForSelector('body[data-ready="true"]');
  const tails = [];
  page.on('request', (r) => { if (r.url().includes('/output?stream=true')) tails.push(r.url()); });
  // The count of running processes shows before the panel is opened.
  await page.waitForSelector(`${T('processes-count')}:text-is("1")`);
  await page.click(T('processes-toggle'));
  const item = `${T('process-item')}[data-process-id="${id}"]`;
  await page.waitForSelector(`${item}[data-state="running"]`);
  assertEqual(await page.textContent(`${item} ${T('process-state-label')}`), 'running', 'listed as running');

  // Live tail.
  await page.click(`${item} button`);
  await page.waitForSelector(`${T('process-detail')}:not([hidden])`);
  await tickAbove(page, 2);
  const seen = await lastTick(page);
  await tickAbove(page, seen + 2);

  // Input reaches it.
  await page.fill(T('process-input'), 'hello there');
  await page.press(T('process-input'), 'Enter');
  await page.waitForFunction(() => document.querySelector('[data-testid="process-output"]').textContent.includes('got hello there'));
  await shot(page, 'tail');

  // The network drops: the tail resumes from its offset.
  await page.evaluate(() => window.__cutStreams());
  const before = await lastTick(page);
  await tickAbove(page, before + 3);
  await ticksInOrder(page);
  const resumed = tails.filter((u) => u.includes(`/processes/${id}/`));
  assert(resumed.length >= 2 && !resumed[resumed.length - 1].includes('offset=0'),
    `the tail reconnected from its offset: ${resumed.join(', ')}`);

  // Stop.
  await page.click(T('process-stop'));
  await page.waitForSelector(`${item}[data-state="exited"]`, { timeout: 20000 });
  const badge = await page.textContent(T('process-state'));
  assert(badge.startsWith('exited'), `the state badge says exited: ${badge}`);
  assert(await page.isDisabled(T('process-stop')), 'Stop is disabled once it exited');
  const listed = (await api('GET', 'processes')).json.processes.find((p) => p.processId === id);
  assertEqual(listed.state, 'exited', 'the server says exited');
  const frozen = await lastTick(page);
  await page.waitForTimeout(600);
  assertEqual(await lastTick(page), frozen, 'no output after Stop');
  await page.waitForSelector(`${T('processes-count')}[hidden]`, { state: 'attached' });
  await shot(page, 'stopped');

  // The agent starts one: the panel (closed) refreshes and opens on it.
  await page.click(T('processes-toggle'));
  await page.waitForSelector(`${T('process-panel')}[hidden]`, { state: 'attached' });
  await sendMessage(page, 'Start the watcher');
  await waitIdle(page);
  await page.waitForSelector(`${T('process-panel')}:not([hidden])`);
  const agentItem = `${T('process-item')}[data-state="running"]:has-text("echo watching; sleep 600")`;
  await page.waitForSelector(agentItem);
  await page.waitForFunction(() => document.querySelector('[data-testid="process-output"]').textContent.includes('watching'));
  assertEqual(await page.textContent(T('process-scope')), 'this conversation', 'scoped to the conversation');
  // Only the conversation's: the process started through plain REST (scope http) is not
  // in it, and the agent's is not in the plain list.
  const shownIds = await page.$$eval(T('process-item'), (items) => items.map((i) => i.dataset.processId));
  assertEqual(shownIds.length, 1, `only the agent's process: ${shownIds}`);
  assert(shownIds[0] !== id, `the REST-started ${id} is not the conversation's`);
  const plain = (await api('GET', 'processes')).json.processes.map((p) => p.processId);
  assertEqual(plain, [id], 'the plain list has the REST-started process only');
  await shot(page, 'agent');

  // Dark theme, narrow window: the panel overlays the transcript.
  const dark = await newPage({ colorScheme: 'dark', width: 760, height: 760, url: page.url() });
  await dark.click(T('processes-toggle'));
  await dark.waitForSelector(agentItem);
  await dark.click(`${agentItem} button`);
  await dark.waitForFunction(() => document.querySelector('[data-testid="process-output"]').textContent.includes('watching'));
  await shot(dark, 'dark-narrow');
});
