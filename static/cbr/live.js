// The event browser's live tail: with "Follow" ticked, new events are added to the table as they
// are published. It reads the API's plain read from the page's last cut: a read that waits on the
// server for the next publish (`wait_ms`: woken by it, no polling, no thread held there), or, with
// a search's filters (which do not wait), a read every 2 s. At most 50 events a read and one read
// a second while events come: a busy stream does not flood the page. Unticked: paused at once
// (the waiting read is let go).
(function () {
  "use strict";
  var WAIT_MS = 20000, BATCH = 50, PAUSE_MS = 1000, POLL_MS = 2000;

  function cell(row, text, cls) {
    var td = document.createElement("td");
    if (cls) td.className = cls;
    if (text instanceof Node) td.appendChild(text); else td.textContent = text;
    row.appendChild(td);
  }
  function code(text) { var c = document.createElement("code"); c.textContent = text; return c; }

  function row(e) {
    var tr = document.createElement("tr");
    tr.className = "live-new";
    cell(tr, code(e.segment + ":" + e.offset), "nowrap");
    cell(tr, e.published_at.replace("T", " ").slice(0, 19), "nowrap");
    cell(tr, e.routing_key || e.key ? code([e.routing_key, e.key && "key " + e.key].filter(Boolean).join(" · ")) : "—");
    var headers = e.headers ? Object.keys(e.headers).map(function (k) { return k + "=" + e.headers[k]; }).join(" ") : "—";
    cell(tr, headers);
    var pre = document.createElement("pre");
    pre.className = "payload";
    pre.textContent = e.payload != null ? e.payload : "base64:" + e.payload_b64;
    cell(tr, pre);
    return tr;
  }

  function start(box) {
    var table = document.querySelector("table.events tbody"), status = document.getElementById("live-status");
    var cut = JSON.parse(box.dataset.cut || "{}"), base = box.dataset.url, filters = box.dataset.filters || "";
    var searching = filters.length > 0, running = false, inFlight = null;

    function say(text) { if (status) status.textContent = text; }
    function next(delay) { setTimeout(read, delay); }
    function read() {
      if (!box.checked) { running = false; say("paused"); return; }
      running = true;
      if (!status || !/ new at /.test(status.textContent)) say("following");
      var query = "?limit=" + BATCH + "&from=" + encodeURIComponent(JSON.stringify(cut)) + filters +
        (searching ? "" : "&wait_ms=" + WAIT_MS);
      inFlight = new AbortController();
      fetch(base + query, { credentials: "same-origin", headers: { Accept: "application/json" }, signal: inFlight.signal })
        .then(function (r) { if (!r.ok) throw new Error(r.status); return r.json(); })
        .then(function (page) {
          var empty = table.querySelector("td.empty");
          if (page.events.length && empty) empty.parentNode.remove();
          page.events.forEach(function (e) { table.appendChild(row(e)); });
          cut = page.next_cut;
          say(page.events.length ? page.events.length + " new at " + new Date().toISOString().slice(11, 19) + " UTC" : "following");
          next(page.events.length ? PAUSE_MS : (searching ? POLL_MS : 0));
        })
        .catch(function (err) {
          running = false;
          if (err.name === "AbortError") { say("paused"); return; }  // unticked: the waiting read let go
          say("stopped: " + err.message + " (tick to retry)"); box.checked = false;
        });
    }
    box.addEventListener("change", function () {
      if (box.checked && !running) read();
      else if (!box.checked && inFlight) inFlight.abort();  // pause now, not when the wait ends
    });
    if (box.checked) read();
  }

  document.addEventListener("DOMContentLoaded", function () {
    var box = document.getElementById("follow");
    if (box) start(box);
  });
})();
