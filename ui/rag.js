// Entry point: hash routing between the four views; each view loads its data when shown.
import { initFiles, loadFiles } from "./files.js";
import { initHealth, loadHealth } from "./health.js";
import { focusSearch, initSearch } from "./search.js";
import { initSync, refreshSync } from "./sync.js";

const VIEWS = {
  search: focusSearch,
  sync: refreshSync,
  files: loadFiles,
  health: loadHealth,
};

function show() {
  const name = window.location.hash.slice(1);
  const view = Object.hasOwn(VIEWS, name) ? name : "search";
  for (const section of document.querySelectorAll(".view")) section.hidden = section.id !== `view-${view}`;
  for (const link of document.querySelectorAll(".tabs a")) {
    if (link.dataset.view === view) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  VIEWS[view]();
}

initSearch();
initSync();
initFiles();
initHealth();
window.addEventListener("hashchange", show);
show();
