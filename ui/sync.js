// Sync panel: start, live progress (Server-Sent Events, polling as the fallback), cancel,
// per-file errors and the history. Everything is read back from the job rows, so a reload or
// a restarted console picks up a running job where it is.
import {
  byId, clear, fmtBytes, fmtDuration, fmtInt, fmtTime, getJson, h, postJson, showError, showStatus,
} from "./common.js";

const ACTIVE = new Set(["queued", "running", "cancelling"]);
const POLL_MS = 1000;
const errorLine = byId("sync-error");
const cancelButton = byId("sync-cancel");
let shownJob = null;
let stream = null;
let pollTimer = null;

export function initSync() {
  byId("sync-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    showStatus(errorLine, "");
    try {
      follow(await postJson("/api/sync", { path: byId("sync-path").value.trim() || null }));
      loadHistory();
    } catch (err) {
      showError(errorLine, err);
    }
  });
  cancelButton.addEventListener("click", async () => {
    if (!shownJob) return;
    cancelButton.disabled = true;
    try {
      showJob(await postJson("/api/sync/cancel", { job_id: shownJob.job_id }));
    } catch (err) {
      showError(errorLine, err);
    }
  });
}

// Called whenever the Sync view is shown: the latest job and the history, from the job rows.
export async function refreshSync() {
  const jobs = await loadHistory();
  if (jobs && jobs.length && (!shownJob || !ACTIVE.has(shownJob.state))) follow(jobs[0]);
}

async function loadHistory() {
  const body = byId("jobs");
  try {
    const data = await getJson("/api/jobs", { limit: 15 });
    clear(body);
    if (!data.jobs.length) {
      body.append(h("tr", {}, h("td", { colspan: 8, class: "muted" }, "No sync has run yet.")));
    }
    for (const job of data.jobs) body.append(historyRow(job));
    return data.jobs;
  } catch (err) {
    if (err.code === "index_missing") {
      clear(body).append(h("tr", {}, h("td", { colspan: 8, class: "muted" }, "Nothing indexed yet: start a sync.")));
    } else {
      showError(errorLine, err);
    }
    return null;
  }
}

function historyRow(job) {
  const took = job.started_at ? (job.finished_at || job.updated_at) - job.started_at : null;
  const c = job.counts;
  const idButton = h("button", { type: "button", class: "link mono" }, job.job_id);
  idButton.addEventListener("click", () => follow(job));
  return h(
    "tr",
    { "data-job": job.job_id },
    h("td", {}, idButton),
    h("td", {}, h("span", { class: `badge state-${job.state}` }, job.state)),
    h("td", { class: "mono" }, job.scope || "(all)"),
    h("td", {}, fmtTime(job.created_at)),
    h("td", {}, took === null ? "" : fmtDuration(took)),
    h("td", { class: "num" }, `${fmtInt(job.completed_files)} / ${fmtInt(job.total_files)}`),
    h("td", {}, `+${c.added} ~${c.updated} −${c.removed}`),
    h("td", { class: "num" }, fmtInt(job.error_count)),
  );
}

function follow(job) {
  showJob(job);
  stopWatching();
  if (ACTIVE.has(job.state)) watch(job.job_id);
}

function stopWatching() {
  if (stream) stream.close();
  stream = null;
  clearTimeout(pollTimer);
  pollTimer = null;
}

function watch(jobId) {
  if (!window.EventSource) {
    poll(jobId);
    return;
  }
  const source = new EventSource(`/api/sync/events?job_id=${encodeURIComponent(jobId)}`);
  stream = source;
  source.addEventListener("job", (event) => {
    const job = JSON.parse(event.data);
    showJob(job);
    if (!ACTIVE.has(job.state)) {
      stopWatching();
      loadHistory();
    }
  });
  source.addEventListener("error", () => {
    // The stream dropped (console restarted, network hiccup): poll the job row instead.
    if (stream !== source) return;
    stopWatching();
    poll(jobId);
  });
}

async function poll(jobId) {
  try {
    const job = await getJson("/api/sync/status", { job_id: jobId });
    if (errorLine.classList.contains("error")) showStatus(errorLine, "");
    showJob(job);
    if (!ACTIVE.has(job.state)) {
      loadHistory();
      return;
    }
  } catch (err) {
    // The console may be restarting: say so and keep trying at the same pace.
    showError(errorLine, err);
  }
  pollTimer = setTimeout(() => poll(jobId), POLL_MS);
}

function showJob(job) {
  shownJob = job;
  byId("job").hidden = false;
  const active = ACTIVE.has(job.state);
  const state = byId("job-state");
  state.textContent = job.state;
  state.className = `badge state-${job.state}`;
  byId("job-phase").textContent = `phase: ${job.phase}`;
  byId("job-id").textContent = job.job_id;
  const progress = byId("job-progress");
  progress.className = `state-${job.state}`;
  progress.value = job.percent;
  progress.textContent = `${job.percent}%`;
  byId("job-percent").textContent = `${job.percent.toFixed(1)} %`;
  // The same words as the terminal bar and sync_status (helpers.store.job_rows.progress_summary): texts
  // embedded during the semantic phase, files otherwise.
  byId("job-files").textContent = job.progress ? job.progress.text : `${fmtInt(job.completed_files)} / ${fmtInt(job.total_files)} files`;
  byId("job-bytes").textContent = job.total_bytes ? `${fmtBytes(job.done_bytes)} of ${fmtBytes(job.total_bytes)}` : "";
  byId("job-eta").textContent = active && job.eta_seconds !== null ? `about ${fmtDuration(job.eta_seconds)} left` : "";
  byId("job-current").textContent = active && job.current_file ? `Now: ${job.current_file}` : "";
  const counts = clear(byId("job-counts"));
  for (const [name, value] of Object.entries(job.counts)) {
    counts.append(h("div", {}, h("dt", {}, name), h("dd", {}, fmtInt(value))));
  }
  if (job.semantic && job.semantic.total) {
    counts.append(h("div", {}, h("dt", {}, "vectors"), h("dd", {}, `${fmtInt(job.semantic.done)} / ${fmtInt(job.semantic.total)}`)));
  }
  byId("job-message").textContent = job.message || "";
  showSkipped(job.skipped || { total: 0, by_reason: {} });
  const box = byId("job-errors-box");
  box.hidden = !job.error_count;
  byId("job-errors-title").textContent = `${fmtInt(job.error_count)} file error${job.error_count === 1 ? "" : "s"}`;
  const list = clear(byId("job-errors"));
  for (const err of job.errors) list.append(h("li", {}, h("span", { class: "mono" }, err.path), " — ", err.message));
  if (job.error_count > job.errors.length) {
    list.append(h("li", { class: "muted" }, `… and ${fmtInt(job.error_count - job.errors.length)} more`));
  }
  const row = document.querySelector(`#jobs tr[data-job="${CSS.escape(job.job_id)}"]`);
  if (row) row.replaceWith(historyRow(job)); // the history follows the live job too
  cancelButton.disabled = !active || job.state === "cancelling";
  byId("sync-start").disabled = active;
}

// Files the job saw and did not index, by reason, with a few examples each (the Files view lists
// them all with status "skipped").
function showSkipped(skipped) {
  const reasons = Object.entries(skipped.by_reason || {});
  byId("job-skipped-box").hidden = !reasons.length;
  byId("job-skipped-title").textContent = `${fmtInt(skipped.total)} file${skipped.total === 1 ? "" : "s"} not indexed`;
  const list = clear(byId("job-skipped"));
  for (const [reason, item] of reasons) {
    list.append(
      h("li", {}, h("strong", {}, `${reason}: ${fmtInt(item.count)}`), ` — ${item.label}; e.g. `,
        h("span", { class: "mono" }, item.examples.join(", "))),
    );
  }
}
