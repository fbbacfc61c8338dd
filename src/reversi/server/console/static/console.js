// Reversi console: confirm dialogs, live refresh of active runs, live progress of a rollback job.
"use strict";

document.addEventListener("click", (event) => {
  const opener = event.target.closest("[data-open]");
  if (opener) document.getElementById(opener.dataset.open).showModal();
  const closer = event.target.closest("[data-close]");
  if (closer) closer.closest("dialog").close();
});

// The runs list refreshes its rows every 5 s while a run on the page is still active.
function refreshRuns() {
  const table = document.querySelector("table.runs");
  if (!table || table.dataset.live !== "on") return;
  const url = new URL(window.location.href);
  url.searchParams.set("fragment", "rows");
  setTimeout(async () => {
    const response = await fetch(url, { credentials: "same-origin" });
    if (response.ok) {
      document.getElementById("run-rows").innerHTML = await response.text();
      table.dataset.live = document.querySelector("#run-rows tr.active") ? "on" : "off";
    }
    refreshRuns();
  }, 5000);
}

// A rollback job in progress: poll its state every second, reload the page when it is done.
function followJob() {
  const panel = document.getElementById("rollback");
  if (!panel || !["queued", "running"].includes(panel.dataset.jobState)) return;
  const state = document.getElementById("job-state");
  const timer = setInterval(async () => {
    const response = await fetch(`/runs/${panel.dataset.run}/rollback.json`, { credentials: "same-origin" });
    if (!response.ok) return;
    const job = await response.json();
    if (state) state.textContent = job.state + (job.current_step !== null && job.state !== "done" ? ` · step ${job.current_step}` : "");
    if (job.state === "done") { clearInterval(timer); window.location.reload(); }
  }, 1000);
}

document.addEventListener("DOMContentLoaded", () => { refreshRuns(); followJob(); });
