// Search panel: the form, the hit cards, the parent section and its neighbours on demand.
import {
  byId, clear, copyText, getJson, h, markedText, originalUrl, showError, showStatus,
} from "./common.js";

const form = byId("search-form");
const statusLine = byId("search-status");
const warnings = byId("search-warnings");
const results = byId("results");

export function initSearch() {
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    runSearch();
  });
}

export function focusSearch() {
  byId("q").focus();
}

async function runSearch() {
  const params = {
    q: byId("q").value,
    mode: byId("mode").value,
    path_prefix: byId("prefix").value.trim(),
    type: byId("types").value.trim(),
    top_k: byId("topk").value,
  };
  showStatus(statusLine, "Searching…");
  results.setAttribute("aria-busy", "true");
  try {
    render(await getJson("/api/search", params));
  } catch (err) {
    clear(results);
    clear(warnings);
    showError(statusLine, err);
  } finally {
    results.removeAttribute("aria-busy");
  }
}

function render(data) {
  clear(results);
  clear(warnings);
  for (const warning of data.warnings || []) warnings.append(h("li", {}, warning));
  if (data.confidence === "low" && (data.hits || []).length) {
    warnings.append(h("li", {}, "Low confidence: nothing really matched; try other words."));
  }
  const count = data.hits.length;
  showStatus(
    statusLine,
    count
      ? `${count} result${count === 1 ? "" : "s"} in ${Math.round(data.elapsed_ms)} ms (${data.mode})`
      : "No results. Try other words, a shorter query, the document's language, or check Health.",
  );
  for (const hit of data.hits) {
    results.append(hitCard(hit, (data.sections || {})[String(hit.section_id)]));
  }
}

function channelList(channels) {
  const names = Object.keys(channels || {});
  if (!names.length) return null;
  return h(
    "div",
    { class: "channels" },
    "Ranks: ",
    names.map((name) =>
      h("span", { class: "chip", title: `score ${channels[name].score}` }, `${name} #${channels[name].rank}`),
    ),
  );
}

function hitCard(hit, sectionText) {
  const title = hit.title || hit.path.split("/").pop();
  const section = h("div", { class: "section", hidden: true });
  const toggle = h("button", { type: "button", "aria-expanded": "false", class: "show-section" }, "Show section");
  toggle.addEventListener("click", () => toggleSection(hit, sectionText, section, toggle));
  const absPath = h("code", { class: "abs-path" }, hit.abs_path);
  const copy = h("button", { type: "button", class: "small copy" }, "Copy");
  copy.addEventListener("click", () => copyText(hit.abs_path, copy));
  return h(
    "li",
    { class: "hit" },
    h(
      "div",
      { class: "hit-head" },
      h("span", { class: "rank" }, String(hit.rank)),
      h("h3", { class: "title" }, title),
      hit.location_label ? h("span", { class: "location" }, hit.location_label) : null,
      hit.ocr ? h("span", { class: "badge" }, "OCR") : null,
      hit.stale ? h("span", { class: "badge warn", title: "the file changed: sync again" }, "stale") : null,
    ),
    h("div", { class: "path mono", title: hit.citation }, hit.path),
    h("p", { class: "snippet" }, markedText(hit.snippet)),
    channelList(hit.channels),
    h("div", { class: "abs" }, absPath, copy),
    h(
      "div",
      { class: "actions" },
      toggle,
      h(
        "a",
        { href: originalUrl(hit.path, hit.location), target: "_blank", rel: "noopener noreferrer", class: "open" },
        "Open original",
      ),
    ),
    section,
  );
}

function toggleSection(hit, sectionText, box, button) {
  const open = box.hidden;
  box.hidden = !open;
  button.setAttribute("aria-expanded", String(open));
  button.textContent = open ? "Hide section" : "Show section";
  if (!open || box.firstChild) return;
  box.append(h("div", { class: "section-text" }, sectionText || "(section text not returned)"));
  const more = h("button", { type: "button", class: "small" }, "Show neighbouring sections");
  more.addEventListener("click", () => loadNeighbours(hit, box, more));
  box.append(more);
}

async function loadNeighbours(hit, box, button) {
  button.disabled = true;
  try {
    const data = await getJson("/api/read", { path: hit.path, section_id: hit.section_id, before: 1, after: 1 });
    clear(box);
    for (const section of data.sections) {
      box.append(
        h(
          "div",
          { class: section.section_id === hit.section_id ? "neighbour current" : "neighbour" },
          h("div", { class: "location" }, section.location_label || `section ${section.ordinal + 1}`),
          h("div", { class: "section-text" }, section.text),
        ),
      );
    }
  } catch (err) {
    const line = h("p", { class: "status" });
    showError(line, err);
    box.append(line);
    button.disabled = false;
  }
}
