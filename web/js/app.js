// cmdr web UI: agent selector, conversation sidebar, live transcript, agent commands
// panel and inline user-input prompts. No framework: state lives in `state`, the DOM is
// updated by the functions below.
//
// Command runs (`POST /agents/:agent/commands/run`) answer only when the whole run is
// over, so their progress comes from the persisted turns: while the request is open the
// page polls `GET /conversations/:id/turns` and appends every new turn (each step's
// prompt, the model's reply and the command results, as soon as each is stored). For a
// run that starts a new conversation, the id is only in the final answer: the page polls
// `GET /conversations?agentName=` for a conversation that was not there when the run
// started, follows it, and switches to the answer's id at the end if another tab's new
// conversation was picked by mistake.

import { api, ApiError, setToken } from './api.js';
import { h, icon, commandLabel, formatWhen } from './dom.js';
import {
  AssistantView, ToolGroupView, userMessage, turnElement, errorCard, infoNote,
} from './transcript.js';
import { ProcessPanel } from './processes.js';

const $ = (id) => document.getElementById(id);

const el = {
  app: document.querySelector('.app'),
  sidebar: $('sidebar'),
  scrim: $('scrim'),
  sidebarOpen: $('sidebar-open'),
  sidebarClose: $('sidebar-close'),
  agentSelect: $('agent-select'),
  agentDescription: $('agent-description'),
  newConversation: $('new-conversation'),
  conversationList: $('conversation-list'),
  conversationEmpty: $('conversation-empty'),
  toggleArchived: $('toggle-archived'),
  archivedList: $('archived-list'),
  title: $('conversation-title'),
  meta: $('conversation-meta'),
  runIndicator: $('run-indicator'),
  runIndicatorText: $('run-indicator-text'),
  banner: $('banner'),
  scroll: $('transcript-scroll'),
  transcript: $('transcript'),
  commandSelect: $('command-select'),
  commandDescription: $('command-description'),
  execute: $('execute-command'),
  composer: $('composer'),
  input: $('message-input'),
  send: $('send-button'),
  stop: $('stop-button'),
  folder: $('working-folder'),
};

// The background processes of the conversation shown.
const processes = new ProcessPanel({
  panel: $('process-panel'),
  toggle: $('processes-toggle'),
  count: $('processes-count'),
});

// The transcript: turns, then pending questions, then the progress line of a command run.
const turnsBox = h('div', { class: 'turns', testid: 'turns' });
const inputsBox = h('div', { class: 'inputs', testid: 'pending-inputs' });
const progressBox = h('div', { class: 'progress-slot' });
el.transcript.append(turnsBox, inputsBox, progressBox);

const EXAMPLES = [
  'List the files in the working folder and summarise what this project is.',
  'How much disk space is left, and which folders here are the largest?',
  'Which operating system, shell and tool versions are installed?',
  'Find every TODO comment in this folder and group them by file.',
];

const state = {
  agents: [],
  agent: null,
  commands: [],
  conversations: [],
  showArchived: false,
  conversation: null, // the open conversation's record, or null for a new one
  conversationId: null,
  renderedTurns: new Set(),
  hydration: null, // AbortController of the turns fetch in flight
  run: null, // { kind, controller }
  health: null,
  answered: new Set(),
  settling: null, // Promise while the turns of a stopped run are still being stored
};

// ---------------------------------------------------------------------------------------
// Small view helpers

function nearBottom() {
  const s = el.scroll;
  return s.scrollHeight - s.scrollTop - s.clientHeight < 120;
}

function scrollToBottom() {
  el.scroll.scrollTop = el.scroll.scrollHeight;
}

/** Runs `fn`, then keeps the transcript pinned to the bottom if it was there. */
function pinned(fn) {
  const stick = nearBottom();
  const result = fn();
  if (stick) requestAnimationFrame(scrollToBottom);
  return result;
}

function appendTurn(node) {
  pinned(() => turnsBox.append(node));
  updateEmptyState();
}

function showBanner(content, kind = 'warning') {
  el.banner.replaceChildren(...[].concat(content));
  el.banner.className = `banner banner-${kind}`;
  el.banner.hidden = false;
}

function hideBanner() {
  el.banner.hidden = true;
  el.banner.replaceChildren();
}

function setIndicator(text) {
  if (!text) {
    el.runIndicator.hidden = true;
    return;
  }
  el.runIndicator.hidden = false;
  el.runIndicatorText.textContent = text;
}

function setProgress(text) {
  progressBox.replaceChildren();
  if (text) {
    pinned(() => progressBox.append(h('div', { class: 'progress', testid: 'run-progress' },
      h('span', { class: 'spinner', attrs: { 'aria-hidden': 'true' } }),
      h('span', { text }))));
  }
}

function updateEmptyState() {
  const existing = turnsBox.querySelector('.empty-state');
  const empty = turnsBox.querySelectorAll('.msg, .notice, .run-note').length === 0
    && inputsBox.childElementCount === 0 && !state.run && !state.hydration;
  if (!empty) {
    if (existing) existing.remove();
    return;
  }
  if (existing) return;
  const llmMissing = state.health && state.health.llm === false;
  const agent = state.agents.find((a) => a.name === state.agent);
  turnsBox.append(h('div', { class: 'empty-state', testid: 'empty-state' },
    h('div', { class: 'empty-mark' }, icon('terminal', 28)),
    h('h2', { text: agent ? `What should ${agent.name} do?` : 'Start a conversation' }),
    h('p', {
      class: 'empty-lead',
      text: 'The agent answers in Markdown and runs shell commands as it goes. Every command appears here with its live output and status.',
    }),
    llmMissing ? errorCard('LLM_UNAVAILABLE', '') : null,
    h('div', { class: 'examples' },
      EXAMPLES.map((text) => h('button', {
        type: 'button',
        class: 'example',
        testid: 'example-prompt',
        on: { click: () => { el.input.value = text; autosize(); send(); } },
      }, h('span', { text }))))));
}

function autosize() {
  el.input.style.height = 'auto';
  el.input.style.height = `${Math.min(el.input.scrollHeight, 220)}px`;
}

function setBusy(kind) {
  const busy = Boolean(kind);
  el.app.classList.toggle('busy', busy);
  el.send.hidden = busy;
  el.stop.hidden = !busy;
  el.agentSelect.disabled = busy;
  el.newConversation.disabled = busy;
  el.sidebar.querySelectorAll('.conversation-item button').forEach((b) => { b.disabled = busy; });
  updateComposer();
}

function updateComposer() {
  const archived = Boolean(state.conversation && state.conversation.archived);
  const busy = Boolean(state.run);
  el.input.disabled = archived;
  el.send.disabled = archived || busy;
  el.folder.disabled = busy;
  const selected = state.commands.find((c) => c.name === el.commandSelect.value);
  el.execute.disabled = archived || busy || !selected || Boolean(selected.disabled);
  el.commandSelect.disabled = busy || state.commands.length === 0;
  el.input.placeholder = archived
    ? 'This conversation is archived — restore it to continue.'
    : 'Ask the agent to do something…';
}

function closeSidebar() {
  el.app.classList.remove('sidebar-open');
  el.scrim.hidden = true;
}

// ---------------------------------------------------------------------------------------
// Location: #agent=<name>&c=<conversation id>

function readHash() {
  const params = new URLSearchParams(location.hash.slice(1));
  return { agent: params.get('agent'), conversation: params.get('c') };
}

function writeHash() {
  const params = new URLSearchParams();
  if (state.agent) params.set('agent', state.agent);
  if (state.conversationId) params.set('c', state.conversationId);
  const hash = `#${params.toString()}`;
  if (location.hash !== hash) history.replaceState(null, '', hash);
}

// ---------------------------------------------------------------------------------------
// Errors that concern the whole page

function handlePageError(e) {
  if (e instanceof ApiError && e.status === 401) {
    askForToken();
    return;
  }
  const message = e instanceof ApiError ? e.message : String(e && e.message ? e.message : e);
  showBanner([icon('alert', 16), h('span', { text: message })], 'error');
}

function askForToken() {
  const input = h('input', { type: 'password', placeholder: 'Token', class: 'token-input', testid: 'token-input' });
  const form = h('form', {
    class: 'token-form',
    on: {
      submit: (ev) => {
        ev.preventDefault();
        setToken(input.value.trim());
        hideBanner();
        boot();
      },
    },
  }, h('span', { text: 'This cmdr server requires an access token (--auth-token).' }), input,
  h('button', { type: 'submit', class: 'button button-primary', text: 'Connect' }));
  showBanner(form, 'warning');
  input.focus();
}

// ---------------------------------------------------------------------------------------
// Agents and commands

async function loadAgents() {
  state.agents = await api.agents();
  el.agentSelect.replaceChildren(...state.agents.map((a) => h('option', { value: a.name, text: a.name })));
  if (state.agents.length === 0) {
    el.agentSelect.append(h('option', { value: '', text: 'No agents found', disabled: true, selected: true }));
  }
}

async function selectAgent(name, { conversationId = null } = {}) {
  state.agent = name || null;
  if (state.agent) localStorage.setItem('cmdr.agent', state.agent);
  el.agentSelect.value = state.agent || '';
  const agent = state.agents.find((a) => a.name === state.agent);
  el.agentDescription.textContent = agent && agent.description ? agent.description : '';
  await Promise.all([loadCommands(), loadConversations()]);
  if (conversationId) await openConversation(conversationId);
  else newConversation();
}

async function loadCommands() {
  const agent = state.agent;
  let commands = [];
  if (agent) {
    try {
      commands = await api.commands(agent);
    } catch (e) {
      handlePageError(e);
    }
  }
  if (agent !== state.agent) return; // the agent changed meanwhile
  const previous = el.commandSelect.value;
  state.commands = commands;
  el.commandSelect.replaceChildren(...commands.map((c) => h('option', {
    value: c.name,
    disabled: Boolean(c.disabled),
    text: c.disabled ? `${commandLabel(c.name)} (invalid)` : commandLabel(c.name),
    dataset: { testid: 'command-option' },
  })));
  if (commands.length === 0) {
    el.commandSelect.append(h('option', { value: '', text: 'No commands for this agent', disabled: true, selected: true }));
  } else {
    const keep = commands.find((c) => c.name === previous && !c.disabled);
    const first = commands.find((c) => !c.disabled);
    el.commandSelect.value = keep ? keep.name : first ? first.name : commands[0].name;
  }
  showCommandDescription();
}

function showCommandDescription() {
  const command = state.commands.find((c) => c.name === el.commandSelect.value);
  el.commandDescription.textContent = command
    ? (command.disabled ? 'Invalid command file — fix it on disk to run it.' : command.description || '')
    : (state.commands.length ? '' : 'Add JSON files under this agent’s commands/ folder to create commands.');
  el.commandDescription.classList.toggle('invalid', Boolean(command && command.disabled));
  updateComposer();
}

// ---------------------------------------------------------------------------------------
// Conversations

async function loadConversations() {
  const agent = state.agent;
  let list = [];
  if (agent) {
    try {
      list = await api.conversations(agent);
    } catch (e) {
      handlePageError(e);
      return;
    }
  }
  if (agent !== state.agent) return;
  state.conversations = list;
  const current = list.find((c) => c.id === state.conversationId);
  if (current) {
    state.conversation = current;
    showConversationHeader();
  }
  renderConversations();
}

function conversationItem(conversation) {
  const active = conversation.id === state.conversationId;
  const title = conversation.title || 'Untitled conversation';
  const action = conversation.archived
    ? h('button', {
      type: 'button', class: 'item-action', testid: 'unarchive-conversation', title: 'Restore',
      attrs: { 'aria-label': `Restore “${title}”` },
      on: { click: (ev) => { ev.stopPropagation(); setArchived(conversation, false); } },
    }, icon('restore', 15))
    : h('button', {
      type: 'button', class: 'item-action', testid: 'archive-conversation', title: 'Archive',
      attrs: { 'aria-label': `Archive “${title}”` },
      on: { click: (ev) => { ev.stopPropagation(); setArchived(conversation, true); } },
    }, icon('archive', 15));
  return h('li', { class: `conversation-item${active ? ' active' : ''}`, dataset: { id: conversation.id } },
    h('button', {
      type: 'button',
      class: 'item-open',
      testid: 'conversation-item',
      dataset: { id: conversation.id },
      attrs: active ? { 'aria-current': 'true' } : {},
      on: { click: () => { closeSidebar(); openConversation(conversation.id); } },
    },
    h('span', { class: 'item-title', text: title }),
    h('span', { class: 'item-when', text: formatWhen(conversation.updatedAt) })),
    action);
}

function renderConversations() {
  const open = state.conversations.filter((c) => !c.archived);
  const archived = state.conversations.filter((c) => c.archived);
  el.conversationList.replaceChildren(...open.map(conversationItem));
  el.conversationEmpty.hidden = open.length > 0;
  el.toggleArchived.hidden = archived.length === 0;
  el.toggleArchived.textContent = state.showArchived ? `Hide archived (${archived.length})` : `Show archived (${archived.length})`;
  el.archivedList.hidden = !state.showArchived || archived.length === 0;
  el.archivedList.replaceChildren(...archived.map(conversationItem));
  if (state.run) setBusy(state.run.kind);
}

async function setArchived(conversation, archived) {
  try {
    if (archived) await api.archive(conversation.id);
    else await api.unarchive(conversation.id);
  } catch (e) {
    handlePageError(e);
    return;
  }
  await loadConversations();
  if (conversation.id === state.conversationId) {
    if (archived) newConversation();
    else {
      state.conversation = state.conversations.find((c) => c.id === conversation.id) || null;
      showConversationHeader();
    }
  }
}

function showConversationHeader() {
  const c = state.conversation;
  el.title.textContent = c ? (c.title || 'Untitled conversation') : 'New conversation';
  const bits = [state.agent || ''];
  if (c && c.cwd) bits.push(c.cwd);
  if (c && c.archived) bits.push('archived');
  el.meta.textContent = bits.filter(Boolean).join(' · ');
  document.title = c && c.title ? `${c.title} · cmdr` : 'cmdr';
  if (c && c.archived) {
    showBanner([icon('archive', 16), h('span', { text: 'This conversation is archived and read-only.' }),
      h('button', {
        type: 'button', class: 'button', testid: 'banner-unarchive', text: 'Restore',
        on: { click: () => setArchived(c, false) },
      })], 'info');
  } else if (el.banner.classList.contains('banner-info')) {
    hideBanner();
  }
  updateComposer();
}

function resetTranscript() {
  if (state.hydration) state.hydration.abort();
  state.hydration = null;
  state.renderedTurns = new Set();
  turnsBox.replaceChildren();
  progressBox.replaceChildren();
}

function newConversation() {
  if (state.run) return;
  state.conversationId = null;
  state.conversation = null;
  resetTranscript();
  writeHash();
  processes.setConversation(null);
  renderConversations();
  showConversationHeader();
  updateEmptyState();
  el.input.focus();
}

async function openConversation(id) {
  if (state.run) return;
  resetTranscript();
  state.conversationId = id;
  state.conversation = state.conversations.find((c) => c.id === id) || null;
  writeHash();
  processes.setConversation(id);
  renderConversations();
  showConversationHeader();
  const controller = new AbortController();
  state.hydration = controller;
  turnsBox.append(h('div', { class: 'loading', testid: 'loading', text: 'Loading conversation…' }));
  try {
    const turns = await api.turns(id, controller.signal);
    if (state.hydration !== controller) return;
    state.hydration = null;
    turnsBox.replaceChildren();
    appendNewTurns(turns);
    requestAnimationFrame(scrollToBottom);
  } catch (e) {
    if (e.name === 'AbortError') return;
    state.hydration = null;
    turnsBox.replaceChildren(errorCard(e.code, e.message));
  }
  updateEmptyState();
}

/** Appends the turns not shown yet (turns are append-only, so ids suffice). */
function appendNewTurns(turns) {
  let added = 0;
  for (const turn of turns) {
    if (state.renderedTurns.has(turn.id)) continue;
    state.renderedTurns.add(turn.id);
    appendTurn(turnElement(turn, state.conversation ? state.conversation.agentName : state.agent));
    added++;
  }
  return added;
}

/** A conversation the running request created: make it the open one. */
async function adoptConversation(id) {
  if (state.conversationId === id) return;
  state.conversationId = id;
  writeHash();
  processes.setConversation(id);
  await loadConversations();
  state.conversation = state.conversations.find((c) => c.id === id) || { id, title: '', agentName: state.agent };
  showConversationHeader();
  renderConversations();
}

// ---------------------------------------------------------------------------------------
// Runs

function startRun(kind) {
  const run = { kind, controller: new AbortController() };
  state.run = run;
  setBusy(kind);
  updateEmptyState();
  return run;
}

function endRun() {
  state.run = null;
  setBusy(null);
  setIndicator(null);
  setProgress(null);
  updateEmptyState();
}

function stop() {
  if (state.run) state.run.controller.abort();
}

function folderValue() {
  const value = el.folder.value.trim();
  return value || undefined;
}

/** Sends the composer's message through `POST /agents/:agent/stream`, rendering events live. */
async function send() {
  if (state.settling) await state.settling;
  const text = el.input.value;
  if (state.run || !text.trim() || !state.agent) return;
  if (state.conversation && state.conversation.archived) return;
  el.input.value = '';
  autosize();
  const agent = state.agent;
  const run = startRun('chat');
  const userEl = userMessage(text);
  appendTurn(userEl);
  requestAnimationFrame(scrollToBottom);
  setIndicator('Thinking…');

  let step = null; // command metadata when the stream runs an agent command
  let assistant = null;
  let tools = null;
  let parts = new Map();
  let started = false; // the first event arrived: the run exists on the server
  let ended = false;
  let aborted = false;
  const ensureAssistant = () => {
    if (!assistant) {
      assistant = new AssistantView({ command: step, agentName: agent });
      appendTurn(assistant.el);
    }
    return assistant;
  };
  const part = (event) => {
    let p = parts.get(event.commandId);
    if (!p) {
      if (!tools) {
        tools = new ToolGroupView({ command: step });
        appendTurn(tools.el);
      }
      p = tools.add(event.commandId, event.command || '', 'queued');
      parts.set(event.commandId, p);
    }
    return p;
  };
  ensureAssistant();

  const body = { message: text };
  if (state.conversationId) body.conversationId = state.conversationId;
  const folder = folderValue();
  if (folder) body.working_folder = folder;

  const onEvent = (event) => pinned(() => {
    started = true;
    switch (event.type) {
      case 'conversation':
        adoptConversation(event.conversationId);
        break;
      case 'command-step':
        if (assistant) assistant.finish('ok');
        step = { name: event.name, stepIndex: event.stepIndex, totalSteps: event.totalSteps };
        assistant = null;
        tools = null;
        parts = new Map();
        appendTurn(userMessage(event.instruction, { command: step }));
        ensureAssistant();
        break;
      case 'text':
        ensureAssistant().append(event.content);
        setIndicator('Writing…');
        break;
      case 'tool-call':
        part(event);
        break;
      case 'tool-start':
        if (assistant && assistant.streaming) assistant.finish('ok');
        part(event).setStatus('running');
        setIndicator(`Running ${event.command}`);
        break;
      case 'tool-output':
        part(event).appendOutput(event.content || '');
        break;
      case 'tool-result':
        part(event).finish(event);
        processes.onAgentEvent(event);
        break;
      case 'iteration-end':
        if (assistant) assistant.finish('ok');
        assistant = null;
        tools = null;
        if (event.hasMoreCommands) {
          ensureAssistant();
          setIndicator('Thinking…');
        }
        break;
      case 'done':
        ended = true;
        if (assistant) {
          assistant.finish(event.reason === 'stopped' ? 'stopped' : 'ok');
          if (!assistant.content) assistant.el.remove();
        }
        if (event.reason === 'max-iterations') {
          appendTurn(infoNote('Stopped at the iteration limit: the commands of the last reply were not run.'));
        } else if (event.reason === 'max-tokens') {
          appendTurn(infoNote('The reply was cut off by the length limit (max_tokens): its commands were not run.'));
        } else if (event.reason === 'repeating') {
          appendTurn(infoNote('Stopped: the agent kept repeating the same commands with the same results.'));
        } else if (event.reason === 'stopped') {
          appendTurn(infoNote('Stopped.'));
        }
        break;
      case 'error':
        ended = true;
        if (assistant) {
          assistant.finish('failed');
          if (!assistant.content) assistant.el.remove();
        }
        appendTurn(errorCard(event.code, event.message));
        break;
      default:
        break; // newer event types are ignored
    }
  });

  try {
    await api.stream(agent, body, run.controller.signal, onEvent);
    if (!ended) {
      if (assistant) assistant.finish('failed');
      appendTurn(errorCard('NETWORK', 'The connection to cmdr ended before the run finished.'));
    }
  } catch (e) {
    if (e.name === 'AbortError') {
      aborted = true;
      markStopped(assistant, parts);
      appendTurn(infoNote('Stopped. The partial reply is saved.'));
    } else if (e instanceof ApiError && !started) {
      // Refused before the run started: nothing was recorded.
      if (assistant) assistant.el.remove();
      userEl.classList.add('unsent');
      userEl.append(h('span', { class: 'unsent-note', text: 'Not sent' }));
      if (!el.input.value) {
        el.input.value = text;
        autosize();
      }
      if (e.status === 401) askForToken();
      appendTurn(errorCard(e.code, e.message));
    } else {
      markStopped(assistant, parts, 'failed');
      appendTurn(errorCard(e.code || 'NETWORK', e.message));
    }
  } finally {
    // The live view shows this run's turns: remember their ids so that polling (a later
    // command run) does not add them again. After a Stop they are stored as the run
    // winds down on the server.
    const id = state.conversationId;
    if (id && started) {
      const mark = (turns) => turns.forEach((t) => state.renderedTurns.add(t.id));
      if (aborted) settle(id, mark);
      else await api.turns(id).then(mark, () => {});
    }
    endRun();
    loadConversations();
  }
}

/**
 * Polls the conversation's turns after a Stop until their number is stable (the server
 * stores the stopped turn as the run winds down), calling `onTurns` with each answer.
 * Runs started meanwhile wait for it (`state.settling`).
 */
function settle(id, onTurns) {
  const work = (async () => {
    let count = -1;
    let stable = 0;
    const deadline = Date.now() + 5000;
    while (Date.now() < deadline && stable < 2) {
      await new Promise((resolve) => setTimeout(resolve, 300));
      let turns;
      try {
        turns = await api.turns(id);
      } catch {
        return;
      }
      onTurns(turns);
      if (turns.length === count) stable++;
      else {
        stable = 0;
        count = turns.length;
      }
    }
  })();
  state.settling = work.finally(() => {
    if (state.settling === settling) state.settling = null;
  });
  const settling = state.settling;
  return settling;
}

function markStopped(assistant, parts, status = 'stopped') {
  if (assistant) {
    if (assistant.streaming) assistant.finish(status);
    if (!assistant.content) assistant.el.remove();
  }
  for (const p of parts.values()) {
    if (p.status === 'running') p.finish({ status: 'stopped' });
    else if (p.status === 'queued') p.finish({ status: 'skipped' });
  }
}

/** Runs the selected agent command; progress comes from polling the persisted turns. */
async function executeCommand() {
  if (state.settling) await state.settling;
  const name = el.commandSelect.value;
  const command = state.commands.find((c) => c.name === name);
  if (state.run || !command || command.disabled || !state.agent) return;
  if (state.conversation && state.conversation.archived) return;
  const agent = state.agent;
  const label = commandLabel(name);
  const run = startRun('command');
  const known = new Set(state.conversations.map((c) => c.id));
  let conversationId = state.conversationId;
  let stepText = '';
  const progressText = () => `Running command “${label}”${stepText}…`;
  setIndicator(`Running ${label}`);
  setProgress(progressText());

  let polling = false;
  const poll = async () => {
    if (polling || state.run !== run) return;
    polling = true;
    try {
      if (!conversationId) {
        const list = await api.conversations(agent);
        const fresh = list.find((c) => !known.has(c.id));
        if (fresh && state.run === run) {
          conversationId = fresh.id;
          await adoptConversation(fresh.id);
        }
      }
      if (conversationId && state.run === run) {
        const turns = await api.turns(conversationId);
        if (state.run !== run || state.conversationId !== conversationId) return;
        appendNewTurns(turns);
        const last = [...turns].reverse().find((t) => t.command && t.command.name === name);
        if (last) stepText = ` — step ${last.command.stepIndex} of ${last.command.totalSteps}`;
        setProgress(progressText());
      }
    } catch {
      // progress is best effort; the final answer tells the outcome
    } finally {
      polling = false;
    }
  };
  const timer = setInterval(poll, 700);

  const body = { commandName: name };
  if (state.conversationId) body.conversationId = state.conversationId;
  const folder = folderValue();
  if (folder) body.working_folder = folder;

  let outcome = null;
  let failure = null;
  let aborted = false;
  try {
    outcome = await api.runCommand(agent, body, run.controller.signal);
  } catch (e) {
    if (e.name === 'AbortError') aborted = true;
    else failure = e;
  }
  clearInterval(timer);

  const finalId = outcome ? outcome.conversationId : conversationId;
  if (finalId && finalId !== state.conversationId) {
    // Followed the wrong new conversation (another tab's), or never found it: show the run's.
    resetTranscript();
    state.conversationId = null;
    await adoptConversation(finalId);
  }
  if (finalId && !aborted) {
    try {
      if (state.conversationId === finalId) appendNewTurns(await api.turns(finalId));
    } catch {
      // shown on the next open
    }
  }
  if (aborted) {
    const note = infoNote(stoppedText(finalId, name, label));
    appendTurn(note);
    endRun();
    loadConversations();
    // The stopped step is stored as the run winds down on the server: pick it up.
    settleAfterStop(finalId, name, label, note);
    return;
  }
  if (failure) {
    if (failure.status === 401) askForToken();
    appendTurn(errorCard(failure.code, failure.message));
  } else if (outcome) {
    reportOutcome(label, outcome);
  }
  endRun();
  loadConversations();
}

function stoppedText(conversationId, name, label) {
  const step = lastStep(conversationId, name);
  if (!step) return `Stopped command “${label}”.`;
  const rest = step.stepIndex < step.totalSteps
    ? ` Steps ${step.stepIndex + 1}–${step.totalSteps} did not run.`
    : '';
  return `Stopped command “${label}” at step ${step.stepIndex} of ${step.totalSteps}.${rest}`;
}

function settleAfterStop(conversationId, name, label, note) {
  if (!conversationId) return;
  settle(conversationId, (turns) => {
    if (state.conversationId !== conversationId || !note.isConnected) return;
    if (appendNewTurns(turns) > 0) {
      note.textContent = stoppedText(conversationId, name, label);
      pinned(() => turnsBox.append(note)); // keep the note last
    }
  });
}

/** The command metadata of the last shown turn of command `name`, if any. */
function lastStep(conversationId, name) {
  if (!conversationId || state.conversationId !== conversationId) return null;
  const notes = [...turnsBox.querySelectorAll('[data-testid="command-note"]')];
  const prefix = `Command run: ${name} (`;
  const last = notes.reverse().find((n) => n.textContent.startsWith(prefix));
  const m = last && last.textContent.slice(prefix.length).match(/^(\d+)\/(\d+)\)$/);
  return m ? { stepIndex: Number(m[1]), totalSteps: Number(m[2]) } : null;
}

function reportOutcome(label, outcome) {
  const status = String(outcome.status || 'completed').toLowerCase();
  const error = outcome.error;
  if (error) {
    const code = typeof error === 'object' ? error.code : outcome.code;
    const message = typeof error === 'object' ? error.message : String(error);
    appendTurn(errorCard(code || 'RUN_FAILED', message));
    return;
  }
  const text = {
    completed: `Command “${label}” completed.`,
    stopped: `Command “${label}” was stopped.`,
    'max-iterations': `Command “${label}” ended at the iteration limit.`,
    'max-tokens': `Command “${label}” ended: a reply was cut off by the length limit.`,
    repeating: `Command “${label}” ended: the agent kept repeating itself.`,
    max_iterations: `Command “${label}” ended at the iteration limit.`,
  }[status] || `Command “${label}” ended (${status}).`;
  appendTurn(infoNote(text, 'command-outcome'));
}

// ---------------------------------------------------------------------------------------
// User input: questions of REQUEST_USER_INPUT commands, answered inline

async function pollInputs() {
  try {
    if (document.visibilityState === 'visible') renderInputs(await api.pendingInputs());
  } catch {
    // the next poll retries
  } finally {
    setTimeout(pollInputs, state.run ? 700 : 1500);
  }
}

function renderInputs(pending) {
  const ids = new Set(pending.map((p) => p.commandId || p.command_id));
  for (const card of [...inputsBox.children]) {
    if (!ids.has(card.dataset.commandId) && !card.classList.contains('answered')) card.remove();
  }
  for (const question of pending) {
    const id = question.commandId || question.command_id;
    if (!id || state.answered.has(id)) continue;
    if ([...inputsBox.children].some((c) => c.dataset.commandId === id)) continue;
    pinned(() => inputsBox.append(inputCard(id, question)));
  }
  updateEmptyState();
}

function inputCard(id, question) {
  const field = h('input', {
    type: 'text', class: 'input-value', testid: 'input-value', placeholder: 'Your answer', autocomplete: 'off',
  });
  const submit = h('button', { type: 'submit', class: 'button button-primary', testid: 'input-submit', text: 'Answer' });
  const status = h('p', { class: 'input-status', testid: 'input-status', hidden: true });
  const form = h('form', { class: 'input-form' }, field, submit);
  const card = h('div', { class: 'input-card', testid: 'input-prompt', dataset: { commandId: id } },
    h('div', { class: 'input-head' }, icon('question', 16), h('strong', { text: 'A command is waiting for your answer' })),
    h('p', { class: 'input-question', testid: 'input-question', text: question.prompt || '' }),
    question.description ? h('p', { class: 'input-description', text: question.description }) : null,
    form,
    status);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    submit.disabled = true;
    field.disabled = true;
    try {
      await api.answerInput(id, field.value);
      state.answered.add(id);
      card.classList.add('answered');
      form.remove();
      status.hidden = false;
      status.textContent = `Answered: ${field.value}`;
      setTimeout(() => { card.remove(); updateEmptyState(); }, 4000);
    } catch (e) {
      submit.disabled = false;
      field.disabled = false;
      status.hidden = false;
      status.textContent = e instanceof ApiError && e.code === 'INPUT_FORBIDDEN'
        ? 'Only the person at the server may answer: open the address that `cmdr serve` printed (…/#answer-key=…) in this browser, then answer again.'
        : e.message;
    }
  });
  return card;
}

// ---------------------------------------------------------------------------------------
// Wiring

el.composer.addEventListener('submit', (ev) => {
  ev.preventDefault();
  send();
});
el.input.addEventListener('keydown', (ev) => {
  if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
    ev.preventDefault();
    send();
  }
});
el.input.addEventListener('input', autosize);
el.stop.addEventListener('click', stop);
el.execute.addEventListener('click', executeCommand);
el.commandSelect.addEventListener('change', showCommandDescription);
el.agentSelect.addEventListener('change', () => selectAgent(el.agentSelect.value));
el.newConversation.addEventListener('click', () => { closeSidebar(); newConversation(); });
el.toggleArchived.addEventListener('click', () => {
  state.showArchived = !state.showArchived;
  renderConversations();
});
el.sidebarOpen.addEventListener('click', () => {
  el.app.classList.add('sidebar-open');
  el.scrim.hidden = false;
});
el.sidebarClose.addEventListener('click', closeSidebar);
el.scrim.addEventListener('click', closeSidebar);
el.folder.addEventListener('change', () => localStorage.setItem('cmdr.folder', el.folder.value.trim()));
document.addEventListener('keydown', (ev) => {
  if (ev.key === 'Escape' && state.run) stop();
});
window.addEventListener('focus', () => {
  if (!state.run && state.agent) {
    loadCommands();
    loadConversations();
  }
});
window.addEventListener('hashchange', () => {
  const wanted = readHash();
  if (state.run) return;
  if (wanted.agent && wanted.agent !== state.agent && state.agents.some((a) => a.name === wanted.agent)) {
    selectAgent(wanted.agent, { conversationId: wanted.conversation });
  } else if (wanted.conversation && wanted.conversation !== state.conversationId) {
    openConversation(wanted.conversation);
  } else if (!wanted.conversation && state.conversationId) {
    newConversation();
  }
});

async function boot() {
  el.folder.value = localStorage.getItem('cmdr.folder') || '';
  try {
    state.health = await api.health();
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) {
      askForToken();
      return;
    }
    state.health = null;
  }
  try {
    await loadAgents();
  } catch (e) {
    handlePageError(e);
    return;
  }
  const wanted = readHash();
  const names = state.agents.map((a) => a.name);
  const agent = [wanted.agent, localStorage.getItem('cmdr.agent')].find((n) => n && names.includes(n)) || names[0];
  await selectAgent(agent, { conversationId: wanted.agent === agent ? wanted.conversation : null });
  await processes.refresh();
  document.body.dataset.ready = 'true';
}

boot();
pollInputs();
