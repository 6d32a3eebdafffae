// Reloading re-hydrates the transcript from the persisted turns: the same bubbles, the
// tool turns split into one part per command with their status and output, long output
// collapsed. Also: the sidebar (open, new, archive, restore), the dark theme and a
// narrow window.

import {
  scenario, assert, assertEqual, T, sendMessage, waitIdle, parts, conversationId, newConversation,
} from './lib.mjs';

async function snapshot(page) {
  return {
    kinds: await page.$$eval(`${T('turns')} > [data-testid^="msg-"]`, (els) => els.map((e) => e.dataset.testid)),
    users: await page.$$eval(`${T('msg-user')} ${T('bubble')}`, (els) => els.map((e) => e.textContent)),
    assistants: await page.$$eval(`${T('msg-assistant')} ${T('bubble')}`, (els) => els.map((e) => e.innerHTML)),
    parts: (await parts(page)).map((p) => ({
      commandId: p.commandId, command: p.command, status: p.status, output: p.output.trim(),
      exit: (p.meta.match(/exit \d+/) || [''])[0], collapsed: p.collapsed,
    })),
  };
}

scenario('reload', async ({ newPage, shot }) => {
  const page = await newPage();
  await sendMessage(page, 'Show me the files and count to sixty');
  await page.waitForSelector(`${T('msg-assistant')} h3`);
  await waitIdle(page);
  const live = await snapshot(page);
  assertEqual(live.kinds, ['msg-user', 'msg-assistant', 'msg-tool', 'msg-assistant', 'msg-tool', 'msg-assistant'], 'live bubbles');
  assertEqual(live.parts.map((p) => [p.commandId, p.command, p.status, p.exit, p.collapsed]), [
    ['cmd-1-0', 'ls', 'completed', 'exit 0', 'false'],
    ['cmd-1-1', 'cat one.txt', 'completed', 'exit 0', 'false'],
    ['cmd-2-0', 'seq 1 60', 'completed', 'exit 0', 'true'],
  ], 'live parts; the long output is collapsed');

  // The collapsed output expands and collapses again.
  const toggle = `${T('tool-part')}[data-command-id="cmd-2-0"] ${T('tool-expand')}`;
  assertEqual(await page.textContent(toggle), 'Show all 60 lines', 'expand toggle');
  await page.click(toggle);
  assertEqual(await page.getAttribute(`${T('tool-part')}[data-command-id="cmd-2-0"]`, 'data-collapsed'), 'false', 'expanded');
  await page.click(toggle);
  assertEqual(await page.getAttribute(`${T('tool-part')}[data-command-id="cmd-2-0"]`, 'data-collapsed'), 'true', 'collapsed again');

  const id = await conversationId(page);
  await page.reload();
  await page.waitForSelector('body[data-ready="true"]');
  await page.waitForSelector(`${T('tool-part')}[data-command-id="cmd-2-0"]`);
  assertEqual(await conversationId(page), id, 'the same conversation is open after a reload');
  const hydrated = await snapshot(page);
  assertEqual(hydrated, live, 'the re-hydrated transcript is the live one');
  assertEqual(await page.textContent(T('conversation-title')), 'Show me the files and count to sixty', 'title');
  await shot(page, 'rehydrated');

  // The same conversation in the dark theme and in a narrow window.
  const url = page.url();
  const dark = await newPage({ colorScheme: 'dark', url });
  await dark.waitForSelector(`${T('tool-part')}[data-command-id="cmd-2-0"]`);
  await shot(dark, 'dark');
  const narrow = await newPage({ width: 390, height: 800, url });
  await narrow.waitForSelector(`${T('tool-part')}[data-command-id="cmd-2-0"]`);
  const offscreen = () => narrow.$eval(T('sidebar'), (el) => el.getBoundingClientRect().right <= 0);
  assert(await offscreen(), 'the sidebar is hidden on a narrow window');
  await shot(narrow, 'narrow');
  await narrow.click(T('sidebar-toggle'));
  await narrow.waitForSelector(`${T('conversation-item')}[data-id="${id}"]`, { state: 'visible' });
  // The drawer slides in: wait until it is fully in view.
  await narrow.waitForFunction(() => document.querySelector('[data-testid="sidebar"]').getBoundingClientRect().left === 0);
  await narrow.waitForTimeout(50);
  await shot(narrow, 'narrow-sidebar');
  await dark.close();
  await narrow.close();

  // Sidebar: a second conversation, open the first again, archive and restore.
  await newConversation(page);
  await sendMessage(page, 'A second conversation');
  await page.waitForSelector(`${T('msg-assistant')}:has-text("Second conversation.")`);
  await waitIdle(page);
  const second = await conversationId(page);
  assertEqual(await page.$$eval(T('conversation-item'), (els) => els.map((e) => e.dataset.id)), [second, id], 'most recent first');
  await page.click(`${T('conversation-item')}[data-id="${id}"]`);
  await page.waitForSelector(`${T('tool-part')}[data-command-id="cmd-2-0"]`);
  assertEqual(await snapshot(page), live, 'opening it from the sidebar shows the same transcript');

  await page.hover(`li[data-id="${second}"]`);
  await page.click(`li[data-id="${second}"] ${T('archive-conversation')}`);
  await page.waitForFunction((sid) => !document.querySelector(`[data-testid="conversation-list"] li[data-id="${sid}"]`), second);
  assertEqual(await page.textContent(T('toggle-archived')), 'Show archived (1)', 'archived count');
  await page.click(T('toggle-archived'));
  await page.click(`${T('archived-list')} li[data-id="${second}"] ${T('conversation-item')}`);
  await page.waitForSelector(`${T('msg-user')}:has-text("A second conversation")`);
  assert(await page.isDisabled(T('message-input')), 'an archived conversation is read-only');
  assert(await page.isVisible(T('banner-unarchive')), 'the banner offers to restore it');
  await shot(page, 'archived');
  await page.click(T('banner-unarchive'));
  await page.waitForSelector(`${T('conversation-list')} li[data-id="${second}"]`);
  assert(!(await page.isDisabled(T('message-input'))), 'restored: writable again');
});
