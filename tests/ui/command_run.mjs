// The agent commands panel: per-agent command lists (labels with spaces, invalid ones
// disabled), the description, the working folder, and a three-step run whose every step
// (prompt and answer) appears from the persisted turns with `Command run: <name> (k/n)`.

import {
  scenario, assert, assertEqual, T, waitIdle, parts, conversationId,
} from './lib.mjs';

const options = (page) => page.$$eval(`${T('command-select')} option`, (els) => els.map((o) => ({
  value: o.value, label: o.textContent, disabled: o.disabled,
})));

scenario('command-run', async ({ newPage, shot, api }) => {
  const page = await newPage();

  assertEqual(await options(page), [
    { value: 'broken', label: 'broken (invalid)', disabled: true },
    { value: 'list_files', label: 'list files', disabled: false },
    { value: 'three_steps', label: 'three steps', disabled: false },
  ], 'helper commands: names as labels with spaces, the invalid one disabled');
  assertEqual(await page.inputValue(T('command-select')), 'list_files', 'the first valid command is selected');
  assertEqual(await page.textContent(T('command-description')), 'List the files of the working folder', 'description');

  // Another agent: its own commands, fetched again.
  await page.selectOption(T('agent-select'), 'reviewer');
  await page.waitForFunction(() => document.querySelector('[data-testid="command-select"]').value === 'review_change');
  assertEqual(await options(page), [{ value: 'review_change', label: 'review change', disabled: false }], 'reviewer commands');
  assertEqual(await page.textContent(T('command-description')), 'Review the latest change', 'reviewer description');
  await page.selectOption(T('agent-select'), 'helper');
  await page.waitForFunction(() => document.querySelectorAll('[data-testid="command-select"] option').length === 3);

  await page.selectOption(T('command-select'), 'three_steps');
  assertEqual(await page.textContent(T('command-description')), 'Inspect the folder in three steps: where, what, summary', 'three_steps description');
  await page.fill(T('working-folder'), workDirOf());
  await page.click(T('execute-command'));

  // Progress while the request is open: the steps' turns appear as they are stored.
  await page.waitForSelector(`${T('stop-button')}:not([hidden])`);
  await page.waitForSelector(T('run-progress'));
  // Step 3's reply is held by the fake model until released below.
  await page.waitForSelector(`${T('msg-user')}:has-text("Step three: summarise.")`, { timeout: 20000 });
  assert(await page.isVisible(T('run-progress')), 'progress shown while the command runs');
  assertEqual(await page.textContent(T('run-progress')), 'Running command “three steps” — step 3 of 3…', 'progress names the step');
  await shot(page, 'progress');
  assertEqual((await api('POST', '__test/release')).status, 200, 'step 3 released');

  await page.waitForSelector(T('command-outcome'), { timeout: 20000 });
  await waitIdle(page);
  assertEqual(await page.textContent(T('command-outcome')), 'Command “three steps” completed.', 'outcome note');

  const users = await page.$$eval(`${T('msg-user')} ${T('bubble')}`, (els) => els.map((e) => e.textContent));
  assertEqual(users, ['Step one: where are we?\nPrint the working directory.', 'Step two: list the files.', 'Step three: summarise.'], 'every step prompt');
  const kinds = await page.$$eval(`${T('turns')} > [data-testid^="msg-"]`, (els) => els.map((e) => e.dataset.testid));
  assertEqual(kinds, [
    'msg-user', 'msg-assistant', 'msg-tool', 'msg-assistant',
    'msg-user', 'msg-assistant', 'msg-tool', 'msg-assistant',
    'msg-user', 'msg-assistant',
  ], 'every step: prompt, replies, results');
  const notes = await page.$$eval(T('command-note'), (els) => els.map((e) => e.textContent));
  assertEqual(notes, [
    ...Array(4).fill('Command run: three_steps (1/3)'),
    ...Array(4).fill('Command run: three_steps (2/3)'),
    ...Array(2).fill('Command run: three_steps (3/3)'),
  ], 'each turn created by the command carries its note');
  const answers = await page.$$eval(`${T('msg-assistant')} ${T('bubble')}`, (els) => els.map((e) => e.textContent.trim()));
  assertEqual(answers[4], 'Summary: a small folder with two text files.', 'the last step answer (Markdown rendered)');
  const all = await parts(page);
  assertEqual(all.map((p) => [p.command, p.status]), [['pwd', 'completed'], ['sleep 0.5; ls', 'completed']], 'command parts');
  assertEqual(all[0].output.trim(), workDirOf(), 'the working folder was passed as working_folder');
  const body = await page.innerText('body');
  assert(!body.includes('{"') && !body.includes('conversationId') && !body.includes('modelId'), 'no raw JSON shown');

  const id = await conversationId(page);
  assert(id, 'the new conversation is open');
  const title = await page.textContent(T('conversation-title'));
  assertEqual(title, 'Step one: where are we? Print the working directory.', 'conversation title');
  await shot(page, 'three-steps');

  // Execute again: in the open conversation.
  await page.selectOption(T('command-select'), 'list_files');
  await page.click(T('execute-command'));
  await page.waitForSelector(`${T('command-note')}:text("Command run: list_files (1/1)")`);
  await page.waitForFunction(() => document.querySelectorAll('[data-testid="command-outcome"]').length === 2);
  await waitIdle(page);
  assertEqual(await conversationId(page), id, 'ran in the open conversation');
  assertEqual(await page.$$eval(T('conversation-item'), (els) => els.length), 1, 'still one conversation');
});

function workDirOf() {
  return process.argv[4];
}
