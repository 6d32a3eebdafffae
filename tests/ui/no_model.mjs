// Without a model configured: the empty state warns, and a run's LLM_UNAVAILABLE error is
// shown in place with how to configure a provider (for Send and for Execute).

import { scenario, assert, assertEqual, T, sendMessage, waitIdle } from './lib.mjs';

scenario('no-model', async ({ newPage, shot }) => {
  const page = await newPage();
  await page.waitForSelector(`${T('empty-state')} ${T('error')}[data-code="LLM_UNAVAILABLE"]`);
  await shot(page, 'empty-state');

  await sendMessage(page, 'Hello?');
  await page.waitForSelector(`${T('turns')} > ${T('error')}[data-code="LLM_UNAVAILABLE"]`);
  await waitIdle(page);
  const text = await page.textContent(`${T('turns')} > ${T('error')} ${T('error-message')}`);
  for (const name of ['CMDR_LLM_BASE_URL', 'CMDR_LLM_MODEL', 'CMDR_LLM_API_KEY']) {
    assert(text.includes(name), `the explanation names ${name}: ${text}`);
  }
  assertEqual(await page.inputValue(T('message-input')), 'Hello?', 'the message is kept for a retry');

  await page.click(T('execute-command'));
  await page.waitForFunction(() => document.querySelectorAll('[data-testid="turns"] > [data-testid="error"][data-code="LLM_UNAVAILABLE"]').length === 2);
  await waitIdle(page);
  await shot(page, 'error');
});
