// A small, safe Markdown renderer for the model's replies, and the `<shell>` splitter.
//
// Safety: every piece of source text is HTML-escaped before any markup is added; the only
// tags in the output are the ones this file writes; link targets must be http(s), mailto
// or relative. Rendering never changes the stored text — it only decides how it looks.
//
// Supported: ATX headings, paragraphs, hard breaks, fenced code (``` and ~~~), indented
// lists (ordered and unordered, nested by indentation), blockquotes, horizontal rules,
// simple pipe tables; inline code, bold, italic, strikethrough, links, bare URLs.

const ESCAPES = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Escapes text for HTML content and attribute values. */
export function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (c) => ESCAPES[c]);
}

// The opening tags of commands (docs/agents.md): `<shell>` with optional attributes
// (`<shell background port="3000">`) and the process tags, which may close themselves
// (`<process-output id="p1"/>`). Same grammar as the loop's detector.
const OPEN_TAG = /<(shell|process-output|process-input|process-kill)((?:[ \t]+[A-Za-z][A-Za-z0-9_-]*(?:=(?:"[^"<\r\n]*"|'[^'<\r\n]*'|[^ \t\r\n"'<>=/]+))?)*)[ \t]*(\/?)>/g;
const ATTRIBUTE = /([A-Za-z][A-Za-z0-9_-]*)(?:=(?:"([^"<\r\n]*)"|'([^'<\r\n]*)'|([^ \t\r\n"'<>=/]+)))?/g;
const OPENERS = ['<shell', '<process-output', '<process-input', '<process-kill'];

/** The attributes of an opening tag, as `{name: value}` (`''` for a bare name). */
function attributesOf(text) {
  const out = {};
  for (const m of text.matchAll(ATTRIBUTE)) out[m[1]] = m[2] ?? m[3] ?? m[4] ?? '';
  return out;
}

/**
 * Splits a reply into `{type:'text', text}` and `{type:'shell', command, closed, tag,
 * attributes}` segments, in order (`tag`: `shell` or a process tag; `command`: what is
 * between the tags). An unclosed tag (a reply still streaming, or cut off) yields a final
 * segment with `closed: false`. With `streaming`, a trailing partial opener is held back
 * so it does not flash as text.
 */
export function splitShell(content, { streaming = false } = {}) {
  const segments = [];
  let pos = 0;
  while (pos < content.length) {
    OPEN_TAG.lastIndex = pos;
    const open = OPEN_TAG.exec(content);
    if (!open) {
      let text = content.slice(pos);
      if (streaming) text = withoutPartialOpener(text);
      if (text) segments.push({ type: 'text', text });
      break;
    }
    if (open.index > pos) segments.push({ type: 'text', text: content.slice(pos, open.index) });
    const tag = open[1];
    const attributes = attributesOf(open[2]);
    const body = open.index + open[0].length;
    if (open[3] === '/') {
      segments.push({ type: 'shell', tag, attributes, command: '', closed: true });
      pos = body;
      continue;
    }
    const closeTag = `</${tag}>`;
    const close = content.indexOf(closeTag, body);
    if (close < 0) {
      segments.push({ type: 'shell', tag, attributes, command: content.slice(body), closed: false });
      break;
    }
    segments.push({ type: 'shell', tag, attributes, command: content.slice(body, close), closed: true });
    pos = close + closeTag.length;
  }
  return segments;
}

/** `text` without a trailing `<…` that may still become an opening tag. */
function withoutPartialOpener(text) {
  const lt = text.lastIndexOf('<');
  if (lt < 0) return text;
  const tail = text.slice(lt);
  if (tail.length > 512 || /[>\r\n]/.test(tail)) return text;
  const name = tail.match(/^<[a-z-]*/)[0];
  const maybe = OPENERS.some((o) => (name.length < o.length ? o.startsWith(name) : name === o && (tail.length === o.length || /[ \t/]/.test(tail[o.length]))));
  return maybe ? text.slice(0, lt) : text;
}

// ---------------------------------------------------------------------------------------
// Blocks

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)[^`]*$/;
const HEADING = /^ {0,3}(#{1,6})(?:\s+(.*?))?\s*#*\s*$/;
const RULE = /^ {0,3}([-*_])(?:\s*\1){2,}\s*$/;
const QUOTE = /^ {0,3}> ?(.*)$/;
const ITEM = /^( *)([-*+]|\d{1,9}[.)])(?:[ \t]+(.*))?$/;
const TABLE_SEP = /^\s*\|?\s*:?-{1,}:?\s*(\|\s*:?-{1,}:?\s*)*\|?\s*$/;

/** Renders Markdown source to an HTML string (safe to assign to `innerHTML`). */
export function renderMarkdown(source) {
  const lines = String(source).replace(/\r\n?/g, '\n').replace(/\0/g, '\uFFFD').split('\n');
  return renderBlocks(lines);
}

function isBlank(line) {
  return /^\s*$/.test(line);
}

function startsBlock(line, next) {
  return FENCE.test(line) || HEADING.test(line) || RULE.test(line) || QUOTE.test(line)
    || ITEM.test(line) || (line.includes('|') && next !== undefined && TABLE_SEP.test(next) && next.includes('-'));
}

function renderBlocks(lines) {
  let html = '';
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (isBlank(line)) {
      i++;
      continue;
    }
    let m = line.match(FENCE);
    if (m) {
      const fence = m[1];
      const lang = m[2] || '';
      const body = [];
      i++;
      const closing = new RegExp(`^ {0,3}${fence[0] === '`' ? '`' : '~'}{${fence.length},}\\s*$`);
      while (i < lines.length && !closing.test(lines[i])) body.push(lines[i++]);
      i++; // the closing fence (or the end)
      const langAttr = lang ? ` data-lang="${escapeHtml(lang)}"` : '';
      const label = lang ? `<span class="code-lang">${escapeHtml(lang)}</span>` : '';
      html += `<div class="code-block">${label}<pre${langAttr}><code>${escapeHtml(body.join('\n'))}</code></pre></div>`;
      continue;
    }
    m = line.match(HEADING);
    if (m && !RULE.test(line)) {
      const level = m[1].length;
      html += `<h${level}>${inline(m[2] || '')}</h${level}>`;
      i++;
      continue;
    }
    if (RULE.test(line)) {
      html += '<hr>';
      i++;
      continue;
    }
    if (QUOTE.test(line)) {
      const body = [];
      while (i < lines.length && !isBlank(lines[i])) {
        const q = lines[i].match(QUOTE);
        body.push(q ? q[1] : lines[i]);
        i++;
      }
      html += `<blockquote>${renderBlocks(body)}</blockquote>`;
      continue;
    }
    if (ITEM.test(line)) {
      const result = renderList(lines, i);
      html += result.html;
      i = result.next;
      continue;
    }
    if (line.includes('|') && i + 1 < lines.length && TABLE_SEP.test(lines[i + 1]) && lines[i + 1].includes('-')) {
      const result = renderTable(lines, i);
      html += result.html;
      i = result.next;
      continue;
    }
    // Paragraph: until a blank line or the start of another block.
    const body = [line];
    i++;
    while (i < lines.length && !isBlank(lines[i]) && !startsBlock(lines[i], lines[i + 1])) {
      body.push(lines[i++]);
    }
    html += `<p>${inlineLines(body)}</p>`;
  }
  return html;
}

function renderList(lines, start) {
  const first = lines[start].match(ITEM);
  const indent = first[1].length;
  const ordered = /\d/.test(first[2]);
  const startNumber = ordered ? parseInt(first[2], 10) : 1;
  const items = [];
  let loose = false;
  let i = start;
  while (i < lines.length) {
    const m = lines[i].match(ITEM);
    if (!m || m[1].length !== indent || /\d/.test(m[2]) !== ordered) break;
    const contentIndent = indent + m[2].length + 1;
    const body = [m[3] || ''];
    i++;
    while (i < lines.length) {
      const line = lines[i];
      if (isBlank(line)) {
        // A blank line continues the item only when indented content follows.
        const next = lines[i + 1];
        if (next !== undefined && !isBlank(next) && leadingSpaces(next) > indent) {
          body.push('');
          loose = true;
          i++;
          continue;
        }
        const m2 = next !== undefined ? next.match(ITEM) : null;
        if (m2 && m2[1].length === indent && /\d/.test(m2[2]) === ordered) loose = true;
        break;
      }
      const spaces = leadingSpaces(line);
      if (spaces > indent) {
        body.push(line.slice(Math.min(spaces, contentIndent)));
        i++;
        continue;
      }
      if (spaces <= indent && (ITEM.test(line) || startsBlock(line, lines[i + 1]))) break;
      body.push(line.trimStart()); // lazy continuation
      i++;
    }
    items.push(body);
    if (i < lines.length && isBlank(lines[i])) {
      const next = lines[i + 1];
      const m2 = next !== undefined ? next.match(ITEM) : null;
      if (m2 && m2[1].length === indent && /\d/.test(m2[2]) === ordered) {
        i++;
        continue;
      }
      break;
    }
  }
  const tag = ordered ? 'ol' : 'ul';
  const startAttr = ordered && startNumber !== 1 ? ` start="${startNumber}"` : '';
  let html = `<${tag}${startAttr}>`;
  for (const body of items) {
    let inner = renderBlocks(body);
    if (!loose) inner = inner.replace(/^<p>([\s\S]*?)<\/p>/, '$1');
    html += `<li>${inner}</li>`;
  }
  html += `</${tag}>`;
  return { html, next: i };
}

function leadingSpaces(line) {
  const m = line.match(/^[ \t]*/);
  return m[0].replace(/\t/g, '    ').length;
}

function splitRow(line) {
  let row = line.trim();
  if (row.startsWith('|')) row = row.slice(1);
  if (row.endsWith('|') && !row.endsWith('\\|')) row = row.slice(0, -1);
  return row.split(/(?<!\\)\|/).map((cell) => cell.trim().replace(/\\\|/g, '|'));
}

function renderTable(lines, start) {
  const head = splitRow(lines[start]);
  const aligns = splitRow(lines[start + 1]).map((cell) => {
    const left = cell.startsWith(':');
    const right = cell.endsWith(':');
    if (left && right) return 'center';
    if (right) return 'right';
    if (left) return 'left';
    return '';
  });
  let i = start + 2;
  const rows = [];
  while (i < lines.length && !isBlank(lines[i]) && lines[i].includes('|')) rows.push(splitRow(lines[i++]));
  const cell = (tag, text, k) => {
    const align = aligns[k] ? ` class="align-${aligns[k]}"` : '';
    return `<${tag}${align}>${inline(text)}</${tag}>`;
  };
  let html = '<div class="table-wrap"><table><thead><tr>';
  html += head.map((text, k) => cell('th', text, k)).join('');
  html += '</tr></thead><tbody>';
  for (const row of rows) {
    html += '<tr>';
    for (let k = 0; k < head.length; k++) html += cell('td', row[k] || '', k);
    html += '</tr>';
  }
  html += '</tbody></table></div>';
  return { html, next: i };
}

// ---------------------------------------------------------------------------------------
// Inline

function inlineLines(lines) {
  return lines
    .map((line, k) => {
      const last = k === lines.length - 1;
      const hard = !last && (/ {2,}$/.test(line) || /\\$/.test(line));
      const text = hard ? line.replace(/(?: {2,}|\\)$/, '') : line;
      return inline(text.trim()) + (last ? '' : hard ? '<br>' : '\n');
    })
    .join('');
}

/** Renders one line (or cell) of inline Markdown to HTML. */
export function inline(text) {
  const stash = [];
  const keep = (html) => `\u0000${stash.push(html) - 1}\u0000`;
  let out = String(text).replace(/\0/g, '\uFFFD');
  // Code spans first: nothing inside them is Markdown.
  out = out.replace(/(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)/g, (_, ticks, code) => {
    const body = code.length > 2 && code.startsWith(' ') && code.endsWith(' ') ? code.slice(1, -1) : code;
    return keep(`<code>${escapeHtml(body)}</code>`);
  });
  out = escapeHtml(out);
  // Links: [text](url "title"); images become links to them (nothing remote is loaded).
  out = out.replace(/!?\[([^\]\n]+)\]\(\s*([^\s)]+)(?:\s+&quot;[^\n]*?&quot;)?\s*\)/g, (whole, label, href) => {
    const url = safeUrl(href);
    if (!url) return whole;
    return keep(`<a href="${url}" target="_blank" rel="noopener noreferrer">${emphasis(label)}</a>`);
  });
  // Bare URLs.
  out = out.replace(/(^|[\s(])(https?:\/\/[^\s<>()]*[^\s<>().,:;!?'"&])/g, (_, before, href) => {
    const url = safeUrl(href);
    return url ? `${before}${keep(`<a href="${url}" target="_blank" rel="noopener noreferrer">${href}</a>`)}` : `${before}${href}`;
  });
  out = emphasis(out);
  return out.replace(/\u0000(\d+)\u0000/g, (_, n) => stash[Number(n)]);
}

function emphasis(text) {
  return text
    .replace(/\*\*(?=\S)([\s\S]*?\S)\*\*/g, '<strong>$1</strong>')
    .replace(/(^|[^\w])__(?=\S)([\s\S]*?\S)__(?!\w)/g, '$1<strong>$2</strong>')
    .replace(/(^|[^*\w])\*(?=[^\s*])([^*]*?[^\s*])\*(?![*\w])/g, '$1<em>$2</em>')
    .replace(/(^|[^\w])_(?=[^\s_])([^_]*?[^\s_])_(?!\w)/g, '$1<em>$2</em>')
    .replace(/~~(?=\S)([\s\S]*?\S)~~/g, '<del>$1</del>');
}

/** The escaped URL if its scheme is allowed (http, https, mailto, or none), else null. */
function safeUrl(escapedHref) {
  const raw = escapedHref
    .replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&lt;/g, '<').replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&');
  // Control characters and whitespace could hide a scheme from the check.
  if (/[\u0000-\u0020\u007f]/.test(raw)) return null;
  const scheme = raw.match(/^([a-zA-Z][a-zA-Z0-9+.-]*):/);
  if (scheme && !['http', 'https', 'mailto'].includes(scheme[1].toLowerCase())) return null;
  if (!scheme && raw.includes(':') && !/^[/?#.]/.test(raw)) return null;
  return escapeHtml(raw);
}
