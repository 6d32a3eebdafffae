// Two pages on one conversation: while the first page's run holds the conversation (the
// fake model's reply is gated), the second page's Execute and Send get 409
// RUN_IN_PROGRESS and show the exact sentence, in place.

import {
  scenario, assert, assertEqual, T, sendMessage, waitIdle, conversationId, lastOf,
} from './lib.mjs';

const EXPECTED = 'This conversation already has a run in progress in another tab/window. '
  + 'Please wait for it to finish or press Abort in the other tab.';

scenario('conflict', async ({ newPage, shot, api }) => {
  const first = await newPage();
  await sendMessage(first, 'Take your time');
  await first.waitForSelector(`${T('msg-assistant')}:has-text("Working on it")`);
  const id = await conversationId(first);
  assert(id, 'the first page knows its conversation');

  const second = await newPage({ url: `${new URL(`#agent=helper&c=${id}`, process.argv[2])}` });
  await second.waitForSelector(`${T('msg-user')}:has-text("Take your time")`);

  // A command run on the busy conversation.
  await second.selectOption(T('command-select'), 'list_files');
  await second.click(T('execute-command'));
  await second.waitForSelector(`${T('error')}[data-code="RUN_IN_PROGRESS"]`);
  assertEqual(await second.textContent(`${T('error')} ${T('error-message')}`), EXPECTED, 'the conflict sentence for Execute');
  await waitIdle(second);

  // A chat message on the busy conversation.
  await sendMessage(second, 'Are you there?');
  await second.waitForFunction(() => document.querySelectorAll('[data-testid="error"][data-code="RUN_IN_PROGRESS"]').length === 2);
  const messages = await second.$$eval(`${T('error')} ${T('error-message')}`, (els) => els.map((e) => e.textContent));
  assertEqual(messages, [EXPECTED, EXPECTED], 'the conflict sentence for Send');
  const unsent = await lastOf(second, 'msg-user');
  assert(await unsent.evaluate((el) => el.classList.contains('unsent')), 'the refused message is marked unsent');
  assertEqual(await second.inputValue(T('message-input')), 'Are you there?', 'the refused message is back in the input');
  await shot(second, 'second-page');

  // The first run goes on and completes once the model continues.
  assertEqual((await api('POST', '__test/release')).status, 200, 'gate released');
  await first.waitForSelector(`${T('msg-assistant')}:has-text("Working on it — all done.")`);
  await waitIdle(first);
  assertEqual(await first.$$(T('error')).then((e) => e.length), 0, 'no error on the first page');
});
