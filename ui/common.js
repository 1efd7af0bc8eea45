// Shared helpers: API calls and DOM building. Document text is untrusted: it only ever reaches
// the page through textContent (never innerHTML), including the highlighted snippets.

export class ApiError extends Error {
  constructor(status, body) {
    super(body.message || `HTTP ${status}`);
    this.status = status;
    this.code = body.error || "error";
    this.hint = body.hint || "";
  }
}

const csrfToken = () => document.querySelector('meta[name="csrf-token"]').content;

async function parse(response) {
  let body = {};
  try {
    body = await response.json();
  } catch {
    body = { message: `HTTP ${response.status}` };
  }
  if (!response.ok) throw new ApiError(response.status, body);
  return body;
}

export function apiUrl(path, params = {}) {
  const url = new URL(path, window.location.origin);
  for (const [key, value] of Object.entries(params)) {
    if (value === undefined || value === null || value === "") continue;
    url.searchParams.set(key, String(value));
  }
  return url.pathname + url.search;
}

export async function getJson(path, params) {
  return parse(await fetch(apiUrl(path, params), { headers: { Accept: "application/json" } }));
}

export async function postJson(path, body) {
  const response = await fetch(path, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-CSRF-Token": csrfToken() },
    body: JSON.stringify(body),
  });
  return parse(response);
}

export const byId = (id) => document.getElementById(id);

// h("div", {class: "x", onclick: fn}, "text", child) -> element; strings become text nodes.
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "class") el.className = value;
    else if (key === "text") el.textContent = value;
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

// "a **term** b" -> text, <mark>term</mark>, text. Odd segments between ** markers are matches.
export function markedText(snippet) {
  const fragment = document.createDocumentFragment();
  const parts = String(snippet || "").split("**");
  if (parts.length % 2 === 0) {
    // An unpaired marker (a cut snippet): show the text as it is rather than guess.
    fragment.append(document.createTextNode(parts.join("**")));
    return fragment;
  }
  parts.forEach((part, i) => {
    if (!part) return;
    if (i % 2 === 1) {
      const mark = document.createElement("mark");
      mark.textContent = part;
      fragment.append(mark);
    } else {
      fragment.append(document.createTextNode(part));
    }
  });
  return fragment;
}

// Link to the original through the console; PDFs open at the hit's page.
export function originalUrl(path, location) {
  const base = apiUrl("/api/file", { path });
  const page = location && location.page;
  return page && path.toLowerCase().endsWith(".pdf") ? `${base}#page=${page}` : base;
}

export function showError(el, err) {
  clear(el);
  el.classList.add("error");
  el.append(h("strong", {}, err.message || String(err)));
  if (err.hint) el.append(" ", h("span", { class: "hint" }, err.hint));
}

export function showStatus(el, text) {
  el.classList.remove("error");
  el.textContent = text;
}

const number = new Intl.NumberFormat();
export const fmtInt = (n) => number.format(n || 0);

export function fmtBytes(n) {
  if (!n) return "0 B";
  const units = ["B", "KB", "MB", "GB", "TB"];
  const i = Math.min(units.length - 1, Math.floor(Math.log(n) / Math.log(1024)));
  const value = n / 1024 ** i;
  return `${value >= 10 || i === 0 ? Math.round(value) : value.toFixed(1)} ${units[i]}`;
}

export function fmtDuration(seconds) {
  if (seconds === null || seconds === undefined) return "";
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${s % 60} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

export function fmtTime(epochSeconds) {
  if (!epochSeconds) return "";
  return new Date(epochSeconds * 1000).toLocaleString();
}

export async function copyText(text, button) {
  const label = button.textContent;
  try {
    await navigator.clipboard.writeText(text);
    button.textContent = "Copied";
  } catch {
    button.textContent = "Copy failed: select the text";
  }
  setTimeout(() => {
    button.textContent = label;
  }, 1500);
}
