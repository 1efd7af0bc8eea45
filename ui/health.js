// Health panel: what rag_service.health reports, laid out as cards, each problem with its fix.
import { byId, clear, fmtBytes, fmtInt, fmtTime, getJson, h, showError, showStatus } from "./common.js";

const statusLine = byId("health-status-line");

export function initHealth() {
  byId("health-refresh").addEventListener("click", loadHealth);
}

export async function loadHealth() {
  showStatus(statusLine, "Checking…");
  try {
    render(await getJson("/api/health"));
  } catch (err) {
    showError(statusLine, err);
  }
}

const pairs = (rows) =>
  h("dl", { class: "kv" }, rows.filter(Boolean).map(([k, v]) => h("div", {}, h("dt", {}, k), h("dd", {}, v ?? "—"))));

const card = (title, ...body) => h("section", { class: "card" }, h("h3", {}, title), ...body);
const wideCard = (title, ...body) => {
  const el = card(title, ...body);
  el.classList.add("wide");
  return el;
};

function engineCard(title, info, extra = []) {
  const state = info.state || "unknown";
  const good = state === "ready" || state === "available";
  return card(
    title,
    h("span", { class: `badge ${good ? "ok" : state === "off" ? "" : "warn"}` }, state),
    pairs([...extra, info.reason ? ["Reason", info.reason] : null]),
    info.hint ? h("p", { class: "hint" }, info.hint) : null,
  );
}

function render(report) {
  showStatus(statusLine, `Status: ${report.status}`);
  statusLine.className = `status health-${report.status}`;
  const root = clear(byId("health"));
  const notes = [
    ...report.problems.map((p) => h("li", { class: "problem" }, p)),
    ...report.warnings.map((w) => h("li", {}, w)),
  ];
  if (notes.length) root.append(card("Problems and warnings", h("ul", { class: "warnings" }, notes)));
  const docs = report.documents || {};
  root.append(
    card(
      "Index",
      pairs([
        ["Documents", fmtInt(docs.total)],
        ...Object.entries(docs)
          .filter(([k]) => k !== "total")
          .map(([k, v]) => [`  ${k.replace("_", " ")}`, fmtInt(v)]),
        ["Sections", fmtInt(report.sections)],
        ["Chunks", fmtInt(report.chunks)],
        ["Documents to re-index", fmtInt(report.needs_reindex_documents)],
        ["Documents with redacted secrets", fmtInt((report.secrets || {}).documents_redacted)],
        ["Schema version", report.schema_version === null ? "—" : String(report.schema_version)],
        ["Chunk scheme", String(report.chunk_scheme)],
      ]),
    ),
    wideCard(
      "Paths",
      pairs([
        ["Knowledge folder", h("code", {}, report.knowledge_dir)],
        ["Data folder", h("code", {}, report.data_dir)],
        ["Index file", h("code", {}, report.db_path)],
        ["Free space (data folder)", report.disk ? fmtBytes(report.disk.data_dir_free_bytes) : "—"],
        ["Read-only", report.read_only || "no"],
      ]),
    ),
    engineCard("Semantic search", report.semantic || {}),
    engineCard("OCR", report.ocr || {}, [
      report.ocr && report.ocr.engine ? ["Engine", `${report.ocr.engine} ${report.ocr.version || ""}`] : null,
      report.ocr && report.ocr.langs_missing && report.ocr.langs_missing.length
        ? ["Missing languages", report.ocr.langs_missing.join(", ")]
        : null,
    ]),
  );
  const job = report.last_job;
  if (job) {
    root.append(
      card(
        "Last sync",
        pairs([
          ["Job", h("span", { class: "mono" }, job.job_id)],
          ["State", h("span", { class: `badge state-${job.state}` }, job.state)],
          ["Finished", fmtTime(job.finished_at) || "not yet"],
          ["Changes", Object.entries(job.counts).map(([k, v]) => `${k} ${v}`).join(", ")],
          ["File errors", fmtInt(job.error_count)],
          job.message ? ["Message", job.message] : null,
        ]),
      ),
    );
  }
  root.append(card("Formats read", h("p", { class: "formats" }, (report.supported_formats || []).join(" · "))));
}
