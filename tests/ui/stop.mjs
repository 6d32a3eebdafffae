// Stop during a long command: live output while it runs, then Stop → the part shows
// `stopped`, and the turn persists as stopped (seen through the API and after a reload).
// Stop also ends an agent command run (the request is aborted, the server cancels).

import {
  scenario, assert, assertEqual, T, sendMessage, waitIdle, parts, conversationId,
} from './lib.mjs';

/** Polls the conversation's turns until `pred(turns)` holds. */
async function turnsUntil(api, id, pred, what) {
  const deadline = Date.now() + 10000;
  let turns = [];
  while (Date.now() < deadline) {
    turns = (await api('GET', `conversations/${encodeURIComponent(id)}/turns`)).json.items;
    if (pred(turns)) return turns;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`${what}: turns are ${JSON.stringify(turns, null, 1)}`);
}

const stoppedRun = (command) => (turns) => turns.some((t) => t.role === 'tool'
  && t.status === 'stopped' && (t.toolRuns || []).some((r) => r.command === command && r.status === 'stopped'));

scenario('stop', async ({ newPage, shot, api }) => {
  const page = await newPage();
  await sendMessage(page, 'Start the long job');
  const running = `${T('tool-part')}[data-command-id="cmd-1-0"][data-status="running"]`;
  await page.waitForSelector(running);
  await page.waitForFunction(() => document.querySelector('[data-testid="tool-output"]')?.textContent.includes('started'));
  assert(await page.isVisible(T('stop-button')), 'Stop is offered while running');
  await shot(page, 'running');

  await page.click(T('stop-button'));
  await page.waitForSelector(`${T('tool-part')}[data-command-id="cmd-1-0"][data-status="stopped"]`);
  await waitIdle(page);
  assert(await page.isVisible(`${T('run-note')}:has-text("Stopped")`), 'a stopped note');

  const id = await conversationId(page);
  await turnsUntil(api, id, stoppedRun('echo started; sleep 1000'), 'the tool turn persists as stopped');

  // After a reload the persisted state is shown.
  await page.reload();
  await page.waitForSelector('body[data-ready="true"]');
  await page.waitForSelector(`${T('tool-part')}[data-status="stopped"]`);
  const shown = await parts(page);
  assertEqual(shown.map((p) => [p.command, p.status]), [['echo started; sleep 1000', 'stopped']], 're-hydrated stopped part');
  assert(shown[0].output.includes('started'), `the output so far is kept: ${shown[0].output}`);
  await shot(page, 'stopped');

  // Stop during an agent command run, in the same conversation.
  await page.selectOption(T('command-select'), 'list_files');
  await page.click(T('execute-command'));
  await page.waitForSelector(`${T('command-note')}:text("Command run: list_files (1/1)")`);
  await page.waitForSelector(`${T('msg-assistant')} ${T('shell-block')} code:text-is("sleep 1000")`, { timeout: 20000 });
  await page.click(T('stop-button'));
  await page.waitForSelector(`${T('run-note')}:has-text("Stopped command")`);
  await waitIdle(page);
  assertEqual(await conversationId(page), id, 'same conversation');
  await turnsUntil(api, id, stoppedRun('sleep 1000'), 'the command run persists its stopped step');
  await page.waitForSelector(`${T('tool-part')}[data-status="stopped"] ${T('tool-command')}:text-is("sleep 1000")`);
  const ps = await parts(page);
  assertEqual(ps.map((p) => [p.command, p.status]), [
    ['echo started; sleep 1000', 'stopped'],
    ['sleep 1000', 'stopped'],
  ], 'both stopped parts shown');
  await shot(page, 'command-stopped');
});
