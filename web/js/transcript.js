// The transcript: user, assistant and tool bubbles, built from persisted turns or live
// from a run's events. Command parts are always found by `commandId`, never by text.

import { h, icon, formatDuration } from './dom.js';
import { renderMarkdown, splitShell } from './markdown.js';

/** Output longer than this is collapsed behind a "Show all" toggle once finished. */
const COLLAPSE_LINES = 14;
const COLLAPSE_CHARS = 1600;

const STATUS_LABEL = {
  queued: 'queued',
  running: 'running',
  completed: 'completed',
  failed: 'failed',
  stopped: 'stopped',
  skipped: 'skipped',
};

// Terminal colour and cursor sequences are shown as plain text without them.
// eslint-disable-next-line no-control-regex
const ANSI = /\u001b\[[0-?]*[ -/]*[@-~]|\u001b\][^\u0007]*\u0007/g;

function stripAnsi(text) {
  return text.replace(ANSI, '');
}

/** `Command run: <name> (<k>/<n>)` for a turn written by an agent command step. */
export function commandNote(command) {
  if (!command) return null;
  return h('div', { class: 'command-note', testid: 'command-note' },
    icon('play', 10),
    `Command run: ${command.name} (${command.stepIndex}/${command.totalSteps})`);
}

// ---------------------------------------------------------------------------------------
// User

export function userMessage(text, { command, turnId } = {}) {
  return h('article', { class: 'msg msg-user', testid: 'msg-user', dataset: turnId ? { turnId } : {} },
    commandNote(command),
    h('div', { class: 'bubble', testid: 'bubble', text }));
}

// ---------------------------------------------------------------------------------------
// Assistant

/** An assistant bubble whose raw content can grow (streaming) and is re-rendered. */
export class AssistantView {
  constructor({ command, turnId, agentName } = {}) {
    this.content = '';
    this.streaming = true;
    this.body = h('div', { class: 'bubble markdown', testid: 'bubble' });
    this.status = h('span', { class: 'turn-status', testid: 'turn-status', hidden: true });
    this.el = h('article', { class: 'msg msg-assistant', testid: 'msg-assistant', dataset: turnId ? { turnId } : {} },
      h('div', { class: 'msg-head' },
        h('span', { class: 'avatar', attrs: { 'aria-hidden': 'true' } }, icon('sparkle', 13)),
        h('span', { class: 'who', text: agentName || 'assistant' }),
        this.status,
        commandNote(command)),
      this.body);
    this.pending = false;
    this.render();
  }

  append(delta) {
    this.content += delta;
    if (!this.pending) {
      this.pending = true;
      requestAnimationFrame(() => {
        this.pending = false;
        this.render();
      });
    }
  }

  set(content) {
    this.content = content;
    this.render();
  }

  /** The reply is complete (`ok`), or ended early (`stopped`, `failed`). */
  finish(status = 'ok') {
    this.streaming = false;
    if (status !== 'ok') {
      this.status.hidden = false;
      this.status.textContent = status;
      this.status.className = `turn-status status-${status}`;
      this.el.dataset.status = status;
    }
    this.render();
  }

  render() {
    this.body.replaceChildren();
    if (!this.content.trim()) {
      if (this.streaming) {
        this.body.append(h('span', { class: 'typing', attrs: { 'aria-label': 'Thinking' } },
          h('i'), h('i'), h('i')));
      } else {
        this.body.append(h('span', { class: 'muted', text: '(no reply)' }));
      }
      return;
    }
    const segments = splitShell(this.content, { streaming: this.streaming });
    let shellGroup = null;
    for (let k = 0; k < segments.length; k++) {
      const segment = segments[k];
      if (segment.type === 'shell') {
        if (!shellGroup) {
          shellGroup = h('div', { class: 'shell-block', testid: 'shell-block' });
          this.body.append(shellGroup);
        }
        shellGroup.append(shellLine(segment));
        continue;
      }
      // Whitespace between two shell tags keeps them in one terminal block.
      if (shellGroup && !segment.text.trim() && segments[k + 1] && segments[k + 1].type === 'shell') continue;
      shellGroup = null;
      if (!segment.text.trim()) continue;
      const chunk = h('div', { class: 'md' });
      chunk.innerHTML = renderMarkdown(segment.text); // escaped by the renderer
      this.body.append(chunk);
    }
  }
}

// ---------------------------------------------------------------------------------------
// Tool

/** One command of an iteration: status badge, live output, exit status and duration. */
export class ToolPartView {
  constructor({ commandId, command, status = 'queued' }) {
    this.output = '';
    this.expanded = false;
    this.badge = h('span', { class: 'badge', testid: 'tool-status' });
    this.pre = h('pre', { class: 'tool-output', testid: 'tool-output', hidden: true });
    this.meta = h('span', { class: 'tool-meta', testid: 'tool-meta' });
    this.toggle = h('button', {
      type: 'button', class: 'tool-expand', testid: 'tool-expand', hidden: true,
      on: { click: () => this.setExpanded(!this.expanded) },
    });
    this.el = h('div', { class: 'tool-part', testid: 'tool-part', dataset: { commandId } },
      h('div', { class: 'tool-head' },
        h('span', { class: 'tool-icon' }, icon('terminal', 14)),
        h('code', { class: 'tool-command', testid: 'tool-command', text: command, title: command }),
        this.meta,
        this.badge),
      this.pre,
      this.toggle);
    this.setStatus(status);
  }

  setStatus(status) {
    // While running, the meta shows the time so far (replaced by the real duration).
    if (status === 'running' && !this.timer) {
      const started = Date.now();
      const tick = () => {
        if (!this.el.isConnected && this.timer) return;
        this.meta.textContent = formatDuration(Math.floor((Date.now() - started) / 1000) * 1000);
      };
      this.timer = setInterval(tick, 1000);
    } else if (status !== 'running' && this.timer) {
      clearInterval(this.timer);
      this.timer = null;
      this.meta.textContent = '';
    }
    this.status = status;
    this.el.dataset.status = status;
    this.badge.className = `badge badge-${status}`;
    this.badge.replaceChildren();
    if (status === 'running') this.badge.append(h('span', { class: 'dot-pulse', attrs: { 'aria-hidden': 'true' } }));
    this.badge.append(STATUS_LABEL[status] || status);
  }

  appendOutput(chunk) {
    this.output += stripAnsi(chunk);
    this.showOutput(true);
  }

  /** The command ended: its (bounded) output, how it ended, exit status and duration. */
  finish({ result, status, exitCode, durationMs }) {
    if (typeof result === 'string') this.output = stripAnsi(result);
    this.setStatus(status || 'completed');
    const bits = [];
    if (exitCode !== undefined && exitCode !== null) bits.push(`exit ${exitCode}`);
    if (durationMs !== undefined && durationMs !== null) bits.push(formatDuration(durationMs));
    this.meta.textContent = bits.join(' · ');
    this.showOutput(false);
  }

  showOutput(live) {
    const text = this.output.replace(/\n$/, '');
    this.pre.hidden = !text;
    this.pre.textContent = text;
    this.pre.classList.toggle('live', live);
    if (live) {
      this.pre.scrollTop = this.pre.scrollHeight;
      this.toggle.hidden = true;
      return;
    }
    const lines = text.split('\n').length;
    const long = lines > COLLAPSE_LINES || text.length > COLLAPSE_CHARS;
    this.lines = lines;
    this.toggle.hidden = !long;
    this.setExpanded(!long);
  }

  setExpanded(expanded) {
    this.expanded = expanded;
    this.pre.classList.toggle('collapsed', !expanded);
    this.el.dataset.collapsed = String(!expanded);
    this.toggle.replaceChildren(icon('chevron', 12),
      expanded ? 'Collapse' : `Show all ${this.lines} lines`);
    this.toggle.classList.toggle('open', expanded);
  }
}

/** The bubble holding one iteration's commands. */
export class ToolGroupView {
  constructor({ command, turnId } = {}) {
    this.parts = new Map();
    this.list = h('div', { class: 'tool-parts' });
    this.el = h('article', { class: 'msg msg-tool', testid: 'msg-tool', dataset: turnId ? { turnId } : {} },
      commandNote(command),
      this.list);
  }

  add(commandId, command, status) {
    const part = new ToolPartView({ commandId, command, status });
    this.parts.set(commandId, part);
    this.list.append(part.el);
    return part;
  }
}

/**
 * Splits a persisted `tool` turn (`$ <command>\n<result>` blocks joined by a blank line)
 * into one block per recorded run, using the runs' commands to find each header — the
 * results themselves may contain blank lines.
 */
export function parseToolTurn(content, toolRuns) {
  const runs = Array.isArray(toolRuns) ? toolRuns : [];
  if (runs.length === 0) {
    return [{ commandId: 'tool', command: firstCommand(content), status: 'completed', output: stripHeader(content) }];
  }
  const blocks = [];
  let pos = 0;
  for (let k = 0; k < runs.length; k++) {
    const run = runs[k];
    const header = `${sign(run)} ${run.command}\n`;
    let start = content.startsWith(header, pos) ? pos : content.indexOf(header, pos);
    let bodyStart;
    if (start < 0) {
      bodyStart = pos;
    } else {
      bodyStart = start + header.length;
    }
    let end = content.length;
    const next = runs[k + 1];
    if (next) {
      const at = content.indexOf(`\n\n${sign(next)} ${next.command}\n`, bodyStart);
      if (at >= 0) end = at;
    }
    blocks.push({
      commandId: run.commandId,
      command: run.command,
      status: run.status || 'completed',
      exitCode: run.exitCode,
      output: content.slice(bodyStart, end),
    });
    pos = next ? Math.min(content.length, end + 2) : content.length;
  }
  return blocks;
}

/** `?` before an `<ask>` question's block, `$` before a command's. */
function sign(run) {
  return run.question ? '?' : '$';
}

function firstCommand(content) {
  const m = content.match(/^\$ (.*)$/m);
  return m ? m[1] : 'output';
}

function stripHeader(content) {
  return content.replace(/^\$ .*\n/, '');
}

export function toolMessageFromTurn(turn) {
  const group = new ToolGroupView({ command: turn.command, turnId: turn.id });
  for (const block of parseToolTurn(turn.content, turn.toolRuns)) {
    const part = group.add(block.commandId, block.command, block.status);
    part.finish({ result: block.output, status: block.status, exitCode: block.exitCode });
  }
  return group.el;
}

// ---------------------------------------------------------------------------------------
// Whole turns, errors and notes

/** The element of one persisted turn. */
export function turnElement(turn, agentName) {
  if (turn.role === 'user') return userMessage(turn.content, { command: turn.command, turnId: turn.id });
  if (turn.role === 'tool') return toolMessageFromTurn(turn);
  const view = new AssistantView({ command: turn.command, turnId: turn.id, agentName });
  view.set(turn.content);
  view.finish(turn.status || 'ok');
  return view.el;
}

const LLM_HELP = 'No language model is configured. Start cmdr with CMDR_LLM_BASE_URL (any '
  + 'OpenAI-compatible endpoint, e.g. https://api.openai.com/v1 or http://localhost:11434/v1 for '
  + 'Ollama) and CMDR_LLM_MODEL set, plus CMDR_LLM_API_KEY if the provider needs a key, then try again.';

export const RUN_IN_PROGRESS_TEXT = 'This conversation already has a run in progress in another '
  + 'tab/window. Please wait for it to finish or press Abort in the other tab.';

/** The sentence shown for an error code (known codes get a helpful explanation). */
export function errorText(code, message) {
  if (code === 'LLM_UNAVAILABLE') return LLM_HELP;
  if (code === 'RUN_IN_PROGRESS') return RUN_IN_PROGRESS_TEXT;
  return message || 'Something went wrong.';
}

const ERROR_TITLE = {
  LLM_UNAVAILABLE: 'No model configured',
  RUN_IN_PROGRESS: 'Conversation busy',
  WORKING_FOLDER_INVALID: 'Working folder must be an absolute path',
  WORKING_FOLDER_NOT_FOUND: 'Working folder not found',
  CONVERSATION_ARCHIVED: 'Conversation archived',
  NETWORK: 'Connection lost',
  UNAUTHORIZED: 'Sign-in needed',
};

export function errorCard(code, message) {
  const title = ERROR_TITLE[code] || 'The run failed';
  return h('div', { class: 'notice notice-error', testid: 'error', dataset: { code: code || '' }, attrs: { role: 'alert' } },
    h('span', { class: 'notice-icon' }, icon('alert', 16)),
    h('div', { class: 'notice-body' },
      h('strong', { text: title }),
      h('p', { testid: 'error-message', text: errorText(code, message) }),
      code ? h('span', { class: 'notice-code', text: code }) : null));
}

export function infoNote(text, testid = 'run-note') {
  return h('div', { class: 'run-note', testid, text });
}

/** One line of a reply's terminal block: `$ command` (with a `background` tag), or a
 * process tag as `› output p1`, `› input p1: y`, `› stop p1`. */
function shellLine(segment) {
  const line = h('div', { class: 'shell-line' + (segment.closed ? '' : ' open'), testid: 'shell-line' });
  const command = segment.command.trim();
  const a = segment.attributes || {};
  if (!segment.tag || segment.tag === 'shell') {
    line.append(h('span', { class: 'shell-prompt', text: '$' }), h('code', { text: command }));
    const background = 'background' in a || 'ready' in a || 'port' in a || 'url' in a;
    if (background && a.background !== 'false') line.append(h('span', { class: 'shell-tag', text: 'background' }));
    return line;
  }
  const id = a.id || command;
  const what = {
    'process-output': `output ${id}`,
    'process-input': `input ${id}: ${[command, a.key ? `[${a.key}]` : '', 'eof' in a ? '[eof]' : ''].filter(Boolean).join(' ')}`,
    'process-kill': `stop ${id}${a.signal ? ` (${a.signal})` : ''}`,
  }[segment.tag];
  line.append(h('span', { class: 'shell-prompt', text: '›' }), h('code', { text: what }));
  return line;
}
