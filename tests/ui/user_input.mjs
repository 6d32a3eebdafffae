// A REQUEST_USER_INPUT command (started by the test through `POST /commands`, as any
// client or an executor would) appears in the page as an inline prompt. A page opened
// without the person key cannot answer it (a command calling the API could not either);
// the page opened at the address `cmdr serve` prints (`#answer-key=…`) answers it, which
// resumes the command, ending SUCCEEDED with the answer.

import { scenario, assert, assertEqual, T } from './lib.mjs';

scenario('user-input', async ({ newPage, shot, api }) => {
  const stranger = await newPage();
  const page = await newPage({ url: `${process.argv[2]}#answer-key=${process.env.CMDR_ANSWER_KEY}` });
  await page.waitForSelector(T('empty-state'));

  // The command waits for its answer; its result stream stays open meanwhile.
  const command = fetch(new URL('commands', process.argv[2]), {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({
      command_id: 'ask-colour',
      commandType: 'REQUEST_USER_INPUT',
      prompt: 'Which colour should the report use?',
      description: 'Asked by the browser test',
    }),
  }).then((r) => r.text());

  const card = `${T('input-prompt')}[data-command-id="ask-colour"]`;
  await stranger.waitForSelector(card);
  await stranger.fill(`${card} ${T('input-value')}`, 'red');
  await stranger.click(`${card} ${T('input-submit')}`);
  await stranger.waitForSelector(`${card} ${T('input-status')}:text("Only the person")`);
  await page.waitForSelector(card);
  assertEqual(await page.textContent(`${card} ${T('input-question')}`), 'Which colour should the report use?', 'the question');
  assert(!(await page.isVisible(T('empty-state'))), 'the prompt replaces the empty state');
  await page.fill(`${card} ${T('input-value')}`, 'teal');
  await shot(page, 'prompt');
  await page.click(`${card} ${T('input-submit')}`);
  await page.waitForSelector(`${card} ${T('input-status')}:text("Answered: teal")`);

  const sse = await command;
  const results = sse.split('\n').filter((l) => l.startsWith('data:')).map((l) => JSON.parse(l.slice(5)));
  const last = results[results.length - 1];
  assertEqual([last.command_id, last.status], ['ask-colour', 'SUCCEEDED'], `terminal result: ${sse}`);
  assert(String(last.resultData).includes('teal'), `the answer is the result: ${sse}`);
  const pending = (await api('GET', 'commands/inputs')).json;
  assertEqual(pending.inputs, [], 'nothing waits any more');
});
