// Files panel: one server-side page at a time (sorting, filtering and paging happen in SQLite),
// so 50,000 files cost the same as 50.
import {
  byId, clear, fmtBytes, fmtInt, getJson, h, originalUrl, showError, showStatus,
} from "./common.js";

const FILTER_DELAY_MS = 300;
const state = { offset: 0, limit: 50, sort: "path", desc: false, total: 0 };
const statusLine = byId("files-status-line");
let filterTimer = null;
let requestSeq = 0;

export function initFiles() {
  const refilter = () => {
    clearTimeout(filterTimer);
    filterTimer = setTimeout(() => {
      state.offset = 0;
      loadFiles();
    }, FILTER_DELAY_MS);
  };
  byId("files-form").addEventListener("submit", (event) => event.preventDefault());
  for (const id of ["files-contains", "files-prefix"]) byId(id).addEventListener("input", refilter);
  byId("files-status").addEventListener("change", refilter);
  byId("files-limit").addEventListener("change", () => {
    state.limit = Number(byId("files-limit").value);
    state.offset = 0;
    loadFiles();
  });
  for (const button of document.querySelectorAll("button[data-sort]")) {
    button.addEventListener("click", () => {
      const column = button.dataset.sort;
      state.desc = state.sort === column ? !state.desc : column !== "path";
      state.sort = column;
      state.offset = 0;
      loadFiles();
    });
  }
  const go = (offset) => {
    const last = Math.max(0, Math.floor((state.total - 1) / state.limit) * state.limit);
    state.offset = Math.min(Math.max(0, offset), last);
    loadFiles();
  };
  byId("files-first").addEventListener("click", () => go(0));
  byId("files-prev").addEventListener("click", () => go(state.offset - state.limit));
  byId("files-next").addEventListener("click", () => go(state.offset + state.limit));
  byId("files-last").addEventListener("click", () => go(Number.MAX_SAFE_INTEGER));
  byId("files-page").addEventListener("change", () => go((Number(byId("files-page").value) - 1) * state.limit));
}

export async function loadFiles() {
  const seq = ++requestSeq;
  const params = {
    status: byId("files-status").value,
    contains: byId("files-contains").value.trim(),
    path_prefix: byId("files-prefix").value.trim(),
    sort: state.sort,
    desc: state.desc ? 1 : 0,
    limit: state.limit,
    offset: state.offset,
  };
  showStatus(statusLine, "Loading…");
  try {
    const data = await getJson("/api/files", params);
    if (seq !== requestSeq) return; // a newer request is on its way: drop this answer
    render(data);
  } catch (err) {
    if (seq !== requestSeq) return;
    clear(byId("files"));
    showError(statusLine, err);
  }
}

function render(data) {
  state.total = data.total;
  const body = clear(byId("files"));
  for (const item of data.items) body.append(fileRow(item));
  const first = data.total ? data.offset + 1 : 0;
  const last = data.offset + data.items.length;
  const pages = Math.max(1, Math.ceil(data.total / state.limit));
  showStatus(statusLine, data.total ? "" : "No files match.");
  byId("files-range").textContent = `${fmtInt(first)}–${fmtInt(last)} of ${fmtInt(data.total)}`;
  byId("files-page").value = String(Math.floor(data.offset / state.limit) + 1);
  byId("files-page").max = String(pages);
  byId("files-pages").textContent = `of ${fmtInt(pages)}`;
  byId("files-first").disabled = byId("files-prev").disabled = data.offset === 0;
  byId("files-next").disabled = byId("files-last").disabled = data.next_offset === null;
  for (const button of document.querySelectorAll("button[data-sort]")) {
    const th = button.parentElement;
    if (button.dataset.sort === state.sort) th.setAttribute("aria-sort", state.desc ? "descending" : "ascending");
    else th.removeAttribute("aria-sort");
  }
}

function fileRow(item) {
  const modified = item.modified_ns ? new Date(item.modified_ns / 1e6).toLocaleString() : "";
  return h(
    "tr",
    {},
    h(
      "td",
      { class: "path-cell" },
      item.status === "skipped"
        ? h("span", { class: "mono", title: item.abs_path }, item.display_path)
        : h("a", { href: originalUrl(item.path), target: "_blank", rel: "noopener noreferrer", title: item.abs_path }, item.path),
      item.error ? h("div", { class: "file-error" }, item.error) : null,
    ),
    h("td", {}, item.format),
    h("td", { class: "num" }, fmtBytes(item.size)),
    h("td", {}, modified),
    h("td", { class: "num" }, fmtInt(item.chunks)),
    h(
      "td",
      {},
      h("span", { class: `badge status-${item.status}` }, item.status.replace("_", " ")),
      item.ocr ? h("span", { class: "badge" }, "OCR") : null,
      item.redactions
        ? h("span", { class: "badge", title: "secrets replaced by [redacted secret]" }, `${item.redactions} redacted`)
        : null,
      item.skip_reason ? h("span", { class: "badge" }, item.skip_reason.replace("_", " ")) : null,
    ),
  );
}
