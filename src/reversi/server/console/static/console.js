// Reversi console: confirm dialogs, live refresh of active runs, live progress of a rollback job.
// Without JavaScript every page still works: the Roll back button opens a confirmation page instead.
"use strict";

document.addEventListener("click", (event) => {
  const opener = event.target.closest("[data-open]");
  const dialog = opener && document.getElementById(opener.dataset.open);
  if (dialog) {
    event.preventDefault(); // the button's form would open the confirmation page
    dialog.showModal(); // focus goes to its Cancel button (autofocus)
  }
  const closer = event.target.closest("[data-close]");
  if (closer) closer.closest("dialog").close();
});

// Enter on the rollback's checkbox would send its form (a browser's implicit submission): in the
// confirmation only a button press rolls back.
document.addEventListener("keydown", (event) => {
  const target = event.target;
  if (event.key === "Enter" && target.closest("form.rollback-confirm") && !["BUTTON", "A"].includes(target.tagName)) {
    event.preventDefault();
  }
});

// Say something in a notice element (nothing: hide it), with an optional link.
function say(notice, text, link) {
  if (!notice) return;
  notice.replaceChildren(text);
  if (link) {
    const a = document.createElement("a");
    a.href = link.href;
    a.textContent = link.text;
    notice.append(" ", a, ".");
  }
  notice.hidden = !text;
}

// GET `url` every `every` ms and hand each answer's HTML to `apply`, which says whether to go on.
// A session that ended stops it, saying so; a network error or a server error pauses it, saying so,
// and it retries, waiting longer each time (up to 30 s).
function poll(url, notice, every, apply) {
  let delay = every;
  const tick = async () => {
    let response = null;
    try {
      response = await fetch(url, { credentials: "same-origin", headers: { Accept: "text/html" } });
    } catch (err) {
      response = null;
    }
    if (response && (response.status === 401 || response.redirected)) {
      const here = window.location.pathname + window.location.search;
      say(notice, "Your session ended: this page no longer refreshes.",
          { href: `/login?next=${encodeURIComponent(here)}`, text: "Sign in again" });
      return;
    }
    if (!response || !response.ok) {
      delay = Math.min(delay * 2, 30000);
      say(notice, `Refresh paused: the server did not answer. Retrying in ${Math.ceil(delay / 1000)} s.`);
      setTimeout(tick, delay);
      return;
    }
    delay = every;
    say(notice, "");
    if (apply(await response.text())) setTimeout(tick, every);
  };
  setTimeout(tick, every);
}

// The runs list refreshes its rows while a run on the page is still active.
function refreshRuns() {
  const table = document.querySelector("table.runs");
  if (!table || table.dataset.live !== "on") return;
  const url = new URL(window.location.href);
  url.searchParams.set("fragment", "rows");
  poll(url, document.getElementById("runs-notice"), Number(table.dataset.refreshMs), (html) => {
    document.getElementById("run-rows").innerHTML = html;
    table.dataset.live = document.querySelector("#run-rows tr.active") ? "on" : "off";
    return table.dataset.live === "on";
  });
}

// Whether a form on the page holds something the operator typed or chose and has not sent.
function unsentInput() {
  return [...document.querySelectorAll("form input, form textarea, form select")].some((field) => {
    if (field.type === "hidden") return false;
    if (field.type === "checkbox" || field.type === "radio") return field.checked !== field.defaultChecked;
    if (field.tagName === "SELECT") { // a select none of whose options is marked shows its first
      const initial = [...field.options].findIndex((o) => o.defaultSelected);
      return field.selectedIndex !== Math.max(initial, 0);
    }
    return field.value !== field.defaultValue;
  });
}

// A rollback job in progress: show its progress as the server renders it; reload the page when it
// is done (a GET: every form answers with a redirect, so a reload never sends one again), unless the
// operator is typing in a form: then say it is done, and leave the reload to them.
function followJob() {
  const panel = document.getElementById("rollback");
  if (!panel || !["queued", "running"].includes(panel.dataset.jobState)) return;
  const url = `/runs/${encodeURIComponent(panel.dataset.run)}/job?fragment=job`;
  poll(url, document.getElementById("job-notice"), Number(panel.dataset.refreshMs) || 1000, (html) => {
    const box = document.getElementById("job");
    box.innerHTML = html;
    const job = box.querySelector(".job");
    panel.dataset.jobState = job ? job.dataset.state : "";
    if (panel.dataset.jobState !== "done") return true;
    if (unsentInput()) {
      say(document.getElementById("job-notice"), "The rollback is done. The steps below show how they stood before it:",
          { href: window.location.pathname, text: "reload when you have sent what you are writing" });
    } else {
      window.location.reload();
    }
    return false;
  });
}

// A Copy button on each JSON block (with JavaScript only: without it, select the text).
function copyButtons(root) {
  for (const block of root.querySelectorAll("pre.json")) {
    if (block.previousElementSibling && block.previousElementSibling.classList.contains("copy")) continue;
    const button = document.createElement("button");
    button.type = "button";
    button.className = "copy link";
    button.textContent = "Copy";
    button.addEventListener("click", async () => {
      try {
        await navigator.clipboard.writeText(block.textContent);
        button.textContent = "Copied";
      } catch (err) {
        button.textContent = "Copy failed: select the text";
      }
    });
    block.before(button);
  }
}

document.addEventListener("DOMContentLoaded", () => { refreshRuns(); followJob(); copyButtons(document); });
