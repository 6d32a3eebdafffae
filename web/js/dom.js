// Tiny DOM helpers: elements are built with properties and text nodes, never from
// untrusted HTML strings (the Markdown renderer is the one place that produces HTML, from
// escaped text).

/**
 * Creates an element. `props`: `class`, `text`, `testid`, `dataset`, `attrs`, `on`
 * (event listeners) and plain properties; `children`: nodes or strings (text nodes).
 */
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'class') el.className = value;
    else if (key === 'text') el.textContent = value;
    else if (key === 'testid') el.dataset.testid = value;
    else if (key === 'dataset') Object.assign(el.dataset, value);
    else if (key === 'attrs') for (const [name, v] of Object.entries(value)) el.setAttribute(name, v);
    else if (key === 'on') for (const [name, fn] of Object.entries(value)) el.addEventListener(name, fn);
    else el[key] = value;
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    el.append(typeof child === 'string' ? document.createTextNode(child) : child);
  }
  return el;
}

/** An inline SVG icon from a path list (trusted, static markup only). */
export function icon(name, size = 14) {
  const paths = ICONS[name] || '';
  const el = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
  el.setAttribute('viewBox', '0 0 24 24');
  el.setAttribute('width', String(size));
  el.setAttribute('height', String(size));
  el.setAttribute('aria-hidden', 'true');
  el.innerHTML = paths;
  return el;
}

const STROKE = 'fill="none" stroke="currentColor" stroke-width="2" stroke-linecap="round" stroke-linejoin="round"';

const ICONS = {
  terminal: `<path d="M5 8l4 4-4 4M12 17h7" ${STROKE}/>`,
  archive: `<path d="M4 7h16v3H4zM6 10v8h12v-8M10 14h4" ${STROKE}/>`,
  restore: `<path d="M4 12a8 8 0 108-8 8 8 0 00-6 2.7M4 4v4h4" ${STROKE}/>`,
  alert: `<path d="M12 4l9 16H3zM12 10v4M12 17.5v.5" ${STROKE}/>`,
  question: `<circle cx="12" cy="12" r="9" ${STROKE}/><path d="M9.5 9.5a2.5 2.5 0 115 0c0 1.5-2.5 2-2.5 3.5M12 16.5v.5" ${STROKE}/>`,
  play: '<path d="M7 5l12 7-12 7z" fill="currentColor"/>',
  chevron: `<path d="M8 10l4 4 4-4" ${STROKE}/>`,
  sparkle: `<path d="M12 3v4M12 17v4M3 12h4M17 12h4M6 6l2.5 2.5M15.5 15.5L18 18M6 18l2.5-2.5M15.5 8.5L18 6" ${STROKE}/>`,
  stop: '<rect x="6" y="6" width="12" height="12" rx="2" fill="currentColor"/>',
  close: `<path d="M6 6l12 12M18 6L6 18" ${STROKE}/>`,
  processes: `<rect x="3" y="4" width="18" height="16" rx="2" ${STROKE}/><path d="M7 9l3 3-3 3M12 15h5" ${STROKE}/>`,
  copy: `<rect x="8" y="8" width="12" height="12" rx="2" ${STROKE}/><path d="M16 8V6a2 2 0 00-2-2H6a2 2 0 00-2 2v8a2 2 0 002 2h2" ${STROKE}/>`,
};

/** Human duration: `850 ms`, `1.2 s`, `2 min 5 s`. */
export function formatDuration(ms) {
  if (ms === undefined || ms === null || Number.isNaN(ms)) return '';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s < 10 ? s.toFixed(1) : Math.round(s)} s`;
  const min = Math.floor(s / 60);
  return `${min} min ${Math.round(s - min * 60)} s`;
}

/** Short relative time for the sidebar: `just now`, `5 min ago`, `Mar 3`. */
export function formatWhen(iso) {
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return '';
  const diff = (Date.now() - t) / 1000;
  if (diff < 45) return 'just now';
  if (diff < 3600) return `${Math.max(1, Math.round(diff / 60))} min ago`;
  if (diff < 86400) return `${Math.round(diff / 3600)} h ago`;
  const d = new Date(t);
  const sameYear = d.getFullYear() === new Date().getFullYear();
  return d.toLocaleDateString(undefined, sameYear
    ? { month: 'short', day: 'numeric' }
    : { year: 'numeric', month: 'short', day: 'numeric' });
}

/** A command name as a label: `_` shown as spaces. */
export function commandLabel(name) {
  return name.replace(/_/g, ' ');
}
