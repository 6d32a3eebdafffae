// The original three cases, seen in the page: commands are matched by commandId.
// 1. Three different commands all go queued → running → completed, each with its output.
// 2. `ls` twice: two parts (cmd-1-0, cmd-1-1), both completed, each with its own output.
// 3. A reply over several iterations: one assistant bubble and one tool bubble per
//    iteration, Markdown rendered.

import {
  scenario, assert, assertEqual, T, sendMessage, waitIdle, parts, statusLog, newConversation, lastOf,
} from './lib.mjs';

scenario('chat-commands', async ({ newPage, shot }) => {
  const page = await newPage();
  await page.waitForSelector(T('empty-state'));
  assertEqual(await page.$$eval(T('example-prompt'), (els) => els.length > 0), true, 'example prompts in the empty state');
  assertEqual(await page.inputValue(T('agent-select')), 'helper', 'first agent selected');

  // Case 1 -------------------------------------------------------------------------------
  let before = (await statusLog(page)).length;
  await sendMessage(page, 'Look at the files, please');
  await page.waitForSelector(`${T('tool-part')}[data-command-id="cmd-1-2"][data-status="completed"]`);
  await waitIdle(page);
  let all = await parts(page);
  assertEqual(all.map((p) => p.commandId), ['cmd-1-0', 'cmd-1-1', 'cmd-1-2'], 'three parts by id');
  assertEqual(all.map((p) => p.command), ['ls', 'cat one.txt', 'sleep 0.3; cat two.txt'], 'commands');
  assertEqual(all.map((p) => p.status), ['completed', 'completed', 'completed'], 'all completed');
  assert(all[0].output.includes('one.txt') && all[0].output.includes('two.txt'), `ls output: ${all[0].output}`);
  assertEqual(all[1].output.trim(), 'first file', 'cat one.txt output');
  assertEqual(all[2].output.trim(), 'second file', 'cat two.txt output');
  for (const p of all) assert(/exit 0/.test(p.meta) && /\d+(\.\d+)? (ms|s)/.test(p.meta), `exit status and duration: ${p.meta}`);
  let log = (await statusLog(page)).slice(before);
  assertEqual(log.map((e) => [e.commandId, e.statuses]), [
    ['cmd-1-0', ['queued', 'running', 'completed']],
    ['cmd-1-1', ['queued', 'running', 'completed']],
    ['cmd-1-2', ['queued', 'running', 'completed']],
  ], 'each part went queued → running → completed');
  // The reply keeps its <shell> tags as terminal lines; the answer is Markdown.
  const shellLines = await page.$$eval(`${T('shell-block')} code`, (els) => els.map((e) => e.textContent));
  assertEqual(shellLines, ['ls', 'cat one.txt', 'sleep 0.3; cat two.txt'], 'shell tags rendered as one terminal block');
  const answer = await (await lastOf(page, 'msg-assistant')).$eval(T('bubble'), (el) => el.innerHTML);
  assert(answer.includes('<strong>one line</strong>') && answer.includes('<code>one.txt</code>') && answer.includes('<li>'), `markdown: ${answer}`);
  assert(!(await page.textContent('body')).includes('<shell>'), 'no raw <shell> tag shown');
  const title = await page.textContent(T('conversation-title'));
  assertEqual(title, 'Look at the files, please', 'the conversation is titled by its first message');
  await shot(page, 'three-commands');

  // Case 2 -------------------------------------------------------------------------------
  await newConversation(page);
  before = (await statusLog(page)).length;
  await sendMessage(page, 'List the folder twice');
  await page.waitForSelector(`${T('tool-part')}[data-command-id="cmd-1-1"][data-status="completed"]`);
  await waitIdle(page);
  all = await parts(page);
  assertEqual(all.map((p) => [p.commandId, p.command, p.status]), [
    ['cmd-1-0', 'ls', 'completed'],
    ['cmd-1-1', 'ls', 'completed'],
  ], 'two separate ls parts, both completed');
  for (const p of all) assert(p.output.includes('one.txt') && p.output.includes('two.txt'), `each ls has its output: ${p.output}`);
  const outputs = await page.$$(T('tool-output'));
  assertEqual(outputs.length, 2, 'two output blocks');
  log = (await statusLog(page)).slice(before);
  assertEqual(log.map((e) => [e.commandId, e.statuses]), [
    ['cmd-1-0', ['queued', 'running', 'completed']],
    ['cmd-1-1', ['queued', 'running', 'completed']],
  ], 'duplicates tracked separately');
  await shot(page, 'duplicate-ls');

  // Case 3 -------------------------------------------------------------------------------
  await newConversation(page);
  await sendMessage(page, 'Do it in two iterations');
  await page.waitForSelector(`${T('msg-assistant')} h2`);
  await waitIdle(page);
  all = await parts(page);
  assertEqual(all.map((p) => [p.commandId, p.status, p.output.trim()]), [
    ['cmd-1-0', 'completed', 'iteration-one'],
    ['cmd-2-0', 'completed', 'iteration-two'],
  ], 'one part per iteration');
  const kinds = await page.$$eval(`${T('turns')} > *`, (els) => els.map((e) => e.dataset.testid));
  assertEqual(kinds, ['msg-user', 'msg-assistant', 'msg-tool', 'msg-assistant', 'msg-tool', 'msg-assistant'], 'bubbles in order');
  const last = await (await lastOf(page, 'msg-assistant')).$eval(T('bubble'), (el) => ({
    h2: el.querySelector('h2')?.textContent,
    items: [...el.querySelectorAll('ol li')].map((li) => li.textContent),
    href: el.querySelector('a')?.getAttribute('href'),
    target: el.querySelector('a')?.getAttribute('target'),
  }));
  assertEqual(last, { h2: 'Summary', items: ['iteration-one', 'iteration-two'], href: 'https://example.com/docs', target: '_blank' }, 'markdown of the last reply');
  // A command run in the same conversation adds only its own turns (the live ones are
  // not repeated by the progress polling).
  await page.click(T('execute-command'));
  await page.waitForSelector(T('command-outcome'));
  await waitIdle(page);
  const after = await page.$$eval(`${T('turns')} > [data-testid^="msg-"]`, (els) => els.map((e) => e.dataset.testid));
  assertEqual(after, [...kinds, 'msg-user', 'msg-assistant'], 'the command run appended its two turns only');
  const sidebar = await page.$$eval(T('conversation-item'), (els) => els.length);
  assertEqual(sidebar, 3, 'three conversations in the sidebar');
  await shot(page, 'multi-iteration');
});
