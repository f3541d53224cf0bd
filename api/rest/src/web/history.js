// The page's trash and a file's history (issue 32), over the REST API of
// api/rest/src/history.rs. Loaded after the page's own script, whose helpers
// it uses ($, el, button, human, when, fileUrl, guarded, errorText,
// expired, say, showUsage, loadListing; the variables epoch, owner, pageAfter).
// Every path and name goes into the DOM as text, never as markup.
"use strict";

// A page of the trash: "Show older" asks for the next one from `next_before`.
const TRASH_PAGE = 100;
let trashBefore = null;
// The file whose history is open ({ path, name }), or null.
let historyOf = null;

function trashSay(text) { $("trash-status").textContent = text; }
function historySay(text) { $("history-status").textContent = text; }

// Fetch with the page's rules: null when the session ended (the page is
// then back at the sign-in) or when the user signed out or in meanwhile;
// otherwise the response, or an Error when the server could not be reached.
async function versionFetch(url, options = {}) {
  const mine = epoch;
  let response;
  try { response = await fetch(url, options); }
  catch { return new Error("cannot reach the server"); }
  if (mine !== epoch) return null;
  if (response.status === 401) { expired(); return null; }
  return response;
}
// The reason a response failed, as the page shows it.
async function whyNot(response) { return response instanceof Error ? response.message : await errorText(response); }

// ---- trash ----
async function openTrash() {
  trashBefore = null;
  trashSay("");
  $("trash-list").replaceChildren();
  if (!$("trash-dialog").open) $("trash-dialog").showModal();
  await loadTrash(null);
}

async function loadTrash(before) {
  let url = `/trash?limit=${TRASH_PAGE}`;
  if (before != null) url += "&before=" + encodeURIComponent(before);
  const response = await versionFetch(url);
  if (!response) return;
  if (!response.ok) { trashSay("Could not list the trash: " + await whyNot(response)); return; }
  const page = await response.json();
  showUsage(page.usage);
  const rows = page.items.map(trashRow);
  if (before == null) $("trash-list").replaceChildren(...rows); else $("trash-list").append(...rows);
  trashBefore = page.next_before ?? null;
  $("trash-more").hidden = trashBefore == null;
  trashShown();
}

// The empty note and the Empty button follow what is listed.
function trashShown() {
  const count = $("trash-list").querySelectorAll("tr[data-id]").length;
  $("trash-empty-note").hidden = count > 0 || trashBefore != null;
  $("trash-empty").disabled = count === 0 && trashBefore == null;
}

// What object lock holds a version with, in words: "retained until …",
// "under a legal hold", both; "" when nothing holds it.
function lockWords(lock) {
  if (!lock) return "";
  const words = [];
  if (lock.retain_until) words.push(`retained (${lock.mode.toLowerCase()}) until ${when(lock.retain_until)}`);
  if (lock.legal_hold) words.push("under a legal hold");
  return words.join(" and ");
}

// A padlock beside a locked version, its reason in words (for screen
// readers too); nothing for one nothing holds.
function padlock(lock) {
  const words = lockWords(lock);
  if (!words) return "";
  const mark = el("span", { className: "lock", textContent: "\u{1F512} " + words, title: `Object lock: ${words}` });
  return mark;
}

function trashRow(item) {
  const restore = button("Restore", `Restore ${item.path}`, () => restoreTrashed(item, row), "restore");
  const purge = button("Delete forever", `Delete ${item.path} forever`, () => purgeTrashed(item, row), "danger purge");
  const locked = lockWords(item.lock);
  if (locked) {
    // Refused by the server too: the page says why before anyone tries.
    purge.disabled = true;
    purge.title = `Cannot be deleted forever: it is ${locked}`;
  }
  const row = el("tr", {},
    el("td", { className: "name" }, item.path, padlock(item.lock)),
    el("td", { className: "size", textContent: human(item.size) }),
    el("td", { className: "when", textContent: when(item.deleted), title: item.deleted }),
    el("td", { className: "actions" }, restore, purge));
  row.dataset.id = item.id;
  row.dataset.path = item.path;
  return row;
}

async function restoreTrashed(item, row) {
  const response = await versionFetch(`/trash/${encodeURIComponent(item.id)}/restore`, { method: "POST", headers: guarded() });
  if (!response) return;
  if (!response.ok) { trashSay(`Could not restore ${item.path}: ` + await whyNot(response)); return; }
  const file = await response.json();
  row.remove();
  trashShown();
  trashSay(file.path === item.path ? `Restored ${item.path}.` : `Restored ${item.path} as ${file.path} (the path holds a file again).`);
  loadListing(pageAfter);
}

async function purgeTrashed(item, row) {
  if (!window.confirm(`Delete ${item.path} forever, with its earlier versions? This cannot be undone.`)) return;
  const response = await versionFetch(`/trash/${encodeURIComponent(item.id)}`, { method: "DELETE", headers: guarded() });
  if (!response) return;
  if (!response.ok && response.status !== 404) { trashSay(`Could not delete ${item.path}: ` + await whyNot(response)); return; }
  row.remove();
  trashShown();
  trashSay(`Deleted ${item.path} forever.`);
  loadListing(pageAfter);
}

async function emptyTrash() {
  if (!window.confirm("Delete everything in the trash forever? This cannot be undone.")) return;
  const response = await versionFetch("/trash", { method: "DELETE", headers: guarded() });
  if (!response) return;
  if (!response.ok) { trashSay("Could not empty the trash: " + await whyNot(response)); return; }
  const { removed } = await response.json();
  trashSay(`Emptied the trash: ${removed} ${removed === 1 ? "file" : "files"} deleted forever.`);
  await loadTrash(null);
  // The usage line shrinks with the trash: the listing brings it.
  loadListing(pageAfter);
}

// ---- a file's history ----
async function openHistory(entry) {
  historyOf = { path: entry.path, name: entry.name };
  $("history-title").textContent = `History of ${entry.path}`;
  // Only the owner writes a tree (through the page, REST, WebDAV or S3),
  // and a version records no more than that.
  $("history-who").textContent = owner
    ? `Every version was written by ${owner}, the only one who writes these files.`
    : "Open mode: anyone on this machine writes these files; a version does not record who.";
  historySay("");
  $("history-list").replaceChildren();
  if (!$("history-dialog").open) $("history-dialog").showModal();
  await loadHistory();
}

async function loadHistory() {
  const of = historyOf;
  const response = await versionFetch(fileUrl(of.path) + "?versions");
  if (!response || historyOf !== of) return;
  if (!response.ok) { historySay("Could not list the versions: " + await whyNot(response)); return; }
  const { versions } = await response.json();
  if (historyOf !== of) return;
  $("history-list").replaceChildren(...versions.map((version) => versionRow(of, version)));
}

function versionRow(of, version) {
  const stamp = when(version.modified);
  const state = version.delete_marker ? "deleted" : version.latest ? "current" : "";
  const actions = el("td", { className: "actions" });
  if (!version.delete_marker) {
    const save = el("a", { className: "button download", href: fileUrl(of.path) + "?version=" + encodeURIComponent(version.version_id), textContent: "Download" });
    save.setAttribute("download", of.name);
    save.setAttribute("aria-label", `Download ${of.name} as of ${stamp}`);
    actions.append(save);
    if (!version.latest) actions.append(button("Restore", `Restore ${of.name} as of ${stamp}`, () => restoreVersion(of, version), "restore"));
  }
  const row = el("tr", {},
    el("td", { className: "when", title: version.modified }, stamp, padlock(version.lock)),
    el("td", { className: "size", textContent: version.size == null ? "—" : human(version.size) }),
    el("td", { className: "state", textContent: state }),
    actions);
  row.dataset.version = version.version_id;
  if (state) row.dataset.state = state;
  return row;
}

async function restoreVersion(of, version) {
  const url = fileUrl(of.path) + "?restore=" + encodeURIComponent(version.version_id);
  const response = await versionFetch(url, { method: "POST", headers: guarded() });
  if (!response) return;
  if (!response.ok) { historySay("Could not restore that version: " + await whyNot(response)); return; }
  // The restored content is a new, current version: list it.
  historySay(`Restored ${of.path} as of ${when(version.modified)}.`);
  say(`Restored ${of.path} as of ${when(version.modified)}.`);
  if (historyOf === of) await loadHistory();
  loadListing(pageAfter);
}

$("trash-open").onclick = openTrash;
$("trash-more").onclick = () => loadTrash(trashBefore);
$("trash-empty").onclick = emptyTrash;
$("history-dialog").addEventListener("close", () => { historyOf = null; });
