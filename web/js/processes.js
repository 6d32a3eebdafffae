// The processes panel: the background processes of the conversation shown (or the
// server's default list on a new conversation), a live tail of the selected one's output
// (SSE from an offset, resumed from the last offset after a disconnect), an input box and
// a Stop button. Refreshed when the agent starts or stops a process, when a tail ends,
// and every few seconds while the panel is open.

import { api } from './api.js';
import { h, icon } from './dom.js';

/** Characters of output kept on the page per process (older text is dropped). */
const KEEP_CHARS = 200_000;
/** How often the open panel refreshes the list. */
const REFRESH_MS = 4000;
/** Pause before a dropped tail reconnects. */
const RECONNECT_MS = 1000;

export class ProcessPanel {
  constructor({ panel, toggle, count }) {
    this.panel = panel;
    this.toggle = toggle;
    this.count = count;
    this.conversation = null;
    this.processes = [];
    this.selected = null;
    this.tail = null;
    this.timer = null;

    this.list = h('ul', { class: 'process-list', testid: 'process-list' });
    this.empty = h('p', { class: 'panel-empty', testid: 'process-empty', text: 'No background processes.' });
    this.title = h('code', { class: 'process-title', testid: 'process-title' });
    this.stateBadge = h('span', { class: 'badge', testid: 'process-state' });
    this.stopButton = h('button', {
      type: 'button',
      class: 'button button-danger process-stop',
      testid: 'process-stop',
      on: { click: () => this.stop() },
    }, icon('stop', 12), 'Stop');
    this.output = h('pre', { class: 'tool-output process-output', testid: 'process-output' });
    this.input = h('input', {
      type: 'text',
      class: 'process-input',
      testid: 'process-input',
      placeholder: 'Type a line for its input…',
      spellcheck: false,
      attrs: { 'aria-label': 'Input for the process' },
    });
    this.status = h('p', { class: 'process-status', testid: 'process-status' });
    const form = h('form', {
      class: 'process-input-form',
      on: { submit: (ev) => { ev.preventDefault(); this.send(); } },
    }, this.input, h('button', { type: 'submit', class: 'button', testid: 'process-send', text: 'Send' }));
    this.detail = h('section', { class: 'process-detail', testid: 'process-detail', hidden: true },
      h('div', { class: 'process-detail-head' }, this.title, this.stateBadge, this.stopButton),
      this.output,
      form,
      this.status);
    const close = h('button', {
      type: 'button',
      class: 'icon-button',
      attrs: { 'aria-label': 'Close the processes panel' },
      on: { click: () => this.setOpen(false) },
    }, icon('close', 16));
    this.scopeNote = h('span', { class: 'panel-scope', testid: 'process-scope' });
    panel.append(
      h('div', { class: 'panel-head' },
        h('h2', { class: 'panel-title', text: 'Processes' }), this.scopeNote, close),
      this.list,
      this.empty,
      this.detail,
    );
    toggle.addEventListener('click', () => this.setOpen(panel.hidden));
  }

  get open() {
    return !this.panel.hidden;
  }

  setOpen(open) {
    this.panel.hidden = !open;
    document.querySelector('.app').classList.toggle('processes-open', open);
    this.toggle.setAttribute('aria-expanded', String(open));
    clearInterval(this.timer);
    this.timer = null;
    if (open) {
      this.refresh();
      this.timer = setInterval(() => this.refresh(), REFRESH_MS);
    }
  }

  /** Shows the processes of `conversation` (`null`: the default list). */
  setConversation(conversation) {
    if (conversation === this.conversation) return;
    this.conversation = conversation;
    this.processes = [];
    this.select(null);
    this.refresh();
  }

  /** An agent event: a process was started, read, typed into or stopped. */
  onAgentEvent(event) {
    if (event.type !== 'tool-result' || !event.processId) return;
    if (event.processState === 'running') {
      // A start (or anything that left a process running): show it.
      this.refresh().then(() => {
        if (!this.open && this.processes.some((p) => p.processId === event.processId)) this.setOpen(true);
        if (!this.selected) this.select(event.processId);
      });
    } else {
      this.refresh();
    }
  }

  async refresh() {
    const conversation = this.conversation;
    let processes;
    try {
      processes = await api.processes(conversation);
    } catch {
      return; // the banner of the page says when the server is gone
    }
    if (conversation !== this.conversation) return;
    this.processes = processes;
    this.render();
  }

  render() {
    const running = this.processes.filter((p) => p.state === 'running').length;
    this.count.textContent = running ? String(running) : '';
    this.count.hidden = !running;
    this.scopeNote.textContent = this.conversation ? 'this conversation' : '';
    this.empty.hidden = this.processes.length > 0;
    this.list.replaceChildren(...[...this.processes].reverse().map((p) => this.item(p)));
    const shown = this.processes.find((p) => p.processId === this.selected);
    if (shown) this.showState(shown);
  }

  item(process) {
    const active = process.processId === this.selected;
    return h('li', {
      class: `process-item${active ? ' active' : ''}`,
      testid: 'process-item',
      dataset: { processId: process.processId, state: process.state },
    }, h('button', {
      type: 'button',
      class: 'process-open',
      on: { click: () => this.select(process.processId) },
    },
    h('span', { class: `state-dot state-${process.state}`, attrs: { 'aria-hidden': 'true' } }),
    h('span', { class: 'process-id', text: process.processId }),
    h('span', { class: 'process-command', text: process.command, title: process.command }),
    h('span', { class: 'process-state-label', testid: 'process-state-label', text: stateText(process) })));
  }

  showState(process) {
    this.stateBadge.textContent = stateText(process);
    this.stateBadge.className = `badge ${process.state === 'running' ? 'badge-running' : 'badge-skipped'}`;
    this.stopButton.disabled = process.state !== 'running';
    this.input.disabled = process.state !== 'running';
  }

  select(id) {
    if (this.tail) this.tail.abort();
    this.tail = null;
    this.selected = id;
    this.output.replaceChildren();
    this.status.textContent = '';
    this.detail.hidden = !id;
    for (const item of this.list.children) item.classList.toggle('active', item.dataset.processId === id);
    if (!id) return;
    const process = this.processes.find((p) => p.processId === id);
    this.title.textContent = process ? process.command : id;
    this.title.title = this.title.textContent;
    if (process) this.showState(process);
    this.follow(id);
  }

  /** Tails the output of `id` from offset 0, reconnecting from the last offset. */
  async follow(id) {
    const controller = new AbortController();
    this.tail = controller;
    const conversation = this.conversation;
    let offset = 0;
    let ended = false;
    while (!ended && !controller.signal.aborted) {
      try {
        await api.processOutput(id, offset, conversation, controller.signal, (event) => {
          if (event.type === 'output') {
            if (event.truncatedBefore !== undefined && event.offset > offset) {
              this.append(`[… ${event.offset - offset} bytes of earlier output dropped …]\n`);
            }
            this.append(event.text || '');
            offset = event.nextOffset;
          } else if (event.type === 'end') {
            ended = true;
          }
        });
      } catch (e) {
        if (e.name === 'AbortError') return;
        if (e.status === 404) {
          this.status.textContent = 'This process is gone.';
          return;
        }
      }
      if (!ended && !controller.signal.aborted) await sleep(RECONNECT_MS);
    }
    if (ended && this.tail === controller) this.refresh();
  }

  append(text) {
    if (!text) return;
    const pre = this.output;
    const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 8;
    pre.append(text);
    if (pre.textContent.length > KEEP_CHARS) pre.textContent = pre.textContent.slice(-KEEP_CHARS);
    if (atEnd) pre.scrollTop = pre.scrollHeight;
  }

  async send() {
    const id = this.selected;
    const text = this.input.value;
    if (!id) return;
    this.input.value = '';
    try {
      await api.processInput(id, `${text}\n`, this.conversation);
      this.status.textContent = '';
    } catch (e) {
      this.status.textContent = e.message;
    }
  }

  async stop() {
    const id = this.selected;
    if (!id) return;
    this.stopButton.disabled = true;
    this.status.textContent = 'Stopping…';
    try {
      const result = await api.processKill(id, this.conversation);
      this.status.textContent = (result && result.message) || '';
    } catch (e) {
      this.status.textContent = e.message;
    }
    this.refresh();
  }
}

/** `running`, `exited 0`, `exited` (killed by a signal). */
function stateText(process) {
  if (process.state !== 'exited') return process.state;
  return process.exitCode === undefined || process.exitCode === null ? 'exited' : `exited ${process.exitCode}`;
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
