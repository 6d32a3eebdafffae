// The REST/SSE client. URLs are relative to the page, so the UI also works when cmdr is
// served under a path prefix behind a proxy.

const TOKEN_KEY = 'cmdr.authToken';
const ANSWER_KEY = 'cmdr.answerKey';

// The person key (`cmdr serve` prints the UI address as `…/#answer-key=<key>`): only a
// holder may answer REQUEST_USER_INPUT questions. Kept for this browser; the address bar
// loses it at the next location update.
{
  const key = new URLSearchParams(location.hash.slice(1)).get('answer-key');
  if (key) localStorage.setItem(ANSWER_KEY, key);
}

/** An error answered by the server (`{"error","code","message"}`) or by the network. */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

function headers(extra = {}) {
  const out = { ...extra };
  const token = localStorage.getItem(TOKEN_KEY);
  if (token) out.Authorization = `Bearer ${token}`;
  return out;
}

/** Remembers the bearer token the server asks for (`--auth-token`). */
export function setToken(token) {
  if (token) localStorage.setItem(TOKEN_KEY, token);
  else localStorage.removeItem(TOKEN_KEY);
}

async function errorFrom(response) {
  let body = null;
  try {
    body = await response.json();
  } catch {
    // not JSON: described by the status below
  }
  const code = (body && body.code) || `HTTP_${response.status}`;
  const message = (body && body.message) || `The server answered ${response.status} ${response.statusText}.`;
  return new ApiError(response.status, code, message);
}

async function request(method, path, { body, signal } = {}) {
  let response;
  try {
    response = await fetch(path, {
      method,
      headers: headers(body === undefined ? {} : { 'Content-Type': 'application/json' }),
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
    });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, 'NETWORK', 'cmdr cannot be reached. Is `cmdr serve` still running?');
  }
  if (!response.ok) throw await errorFrom(response);
  return response;
}

async function json(method, path, options) {
  const response = await request(method, path, options);
  const text = await response.text();
  return text ? JSON.parse(text) : null;
}

const seg = encodeURIComponent;

/** `path` with `conversation=<id>` added to its query when a conversation is given. */
function withScope(path, conversation) {
  if (!conversation) return path;
  return `${path}${path.includes('?') ? '&' : '?'}conversation=${seg(conversation)}`;
}

export const api = {
  health: () => json('GET', 'health'),
  agents: async () => (await json('GET', 'agents')).agents || [],
  commands: async (agent) => (await json('GET', `agents/${seg(agent)}/commands`)).commands || [],
  conversations: async (agent) => (await json('GET', `conversations?agentName=${seg(agent)}`)).conversations || [],
  turns: async (id, signal) => (await json('GET', `conversations/${seg(id)}/turns`, { signal })).items || [],
  archive: (id) => json('POST', `conversations/${seg(id)}/archive`),
  unarchive: (id) => json('POST', `conversations/${seg(id)}/unarchive`),
  runCommand: (agent, body, signal) => json('POST', `agents/${seg(agent)}/commands/run`, { body, signal }),
  pendingInputs: async () => {
    const data = await json('GET', 'commands/inputs');
    if (Array.isArray(data)) return data;
    return (data && (data.inputs || data.items || data.pending)) || [];
  },
  answerInput: (commandId, value) => json('POST', `commands/${seg(commandId)}/input`, {
    body: { value, key: localStorage.getItem(ANSWER_KEY) || '' },
  }),

  // Background processes (docs/processes.md), of one conversation when `conversation` is
  // given (`?conversation=<id>`), else the server's default list.
  processes: async (conversation) => (await json('GET', withScope('processes', conversation))).processes || [],
  processInput: (id, input, conversation) => json('POST', withScope(`processes/${seg(id)}/input`, conversation), {
    body: { input, yield_ms: 0 },
  }),
  processKill: (id, conversation) => json('POST', withScope(`processes/${seg(id)}/kill`, conversation), { body: {} }),

  /**
   * `GET /processes/:id/output?stream=true&offset=`: calls `onEvent` with each `output`
   * and the final `end` event until the stream ends (or `signal` aborts it).
   */
  async processOutput(id, offset, conversation, signal, onEvent) {
    const path = withScope(`processes/${seg(id)}/output?stream=true&offset=${offset}`, conversation);
    const response = await request('GET', path, { signal });
    await readSse(response, onEvent);
  },

  /**
   * `POST /agents/:agent/stream`: calls `onEvent` with every SSE `data:` object until the
   * stream ends. Errors before the stream (4xx/5xx JSON) throw an [`ApiError`]; aborting
   * `signal` throws an `AbortError`.
   */
  async stream(agent, body, signal, onEvent) {
    const response = await request('POST', `agents/${seg(agent)}/stream`, { body, signal });
    await readSse(response, onEvent);
  },
};

/** Reads a `text/event-stream` body, calling `onEvent` with each parsed `data:` JSON. */
export async function readSse(response, onEvent) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  const dispatch = (block) => {
    const data = block
      .split('\n')
      .filter((line) => line.startsWith('data:'))
      .map((line) => line.slice(line.startsWith('data: ') ? 6 : 5))
      .join('\n');
    if (!data) return;
    let event;
    try {
      event = JSON.parse(data);
    } catch {
      return; // not ours (keep-alive comments have no data)
    }
    onEvent(event);
  };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, '\n');
    let cut;
    while ((cut = buffer.indexOf('\n\n')) >= 0) {
      dispatch(buffer.slice(0, cut));
      buffer = buffer.slice(cut + 2);
    }
  }
  buffer += decoder.decode();
  if (buffer.trim()) dispatch(buffer);
}
