// The event browser's keys (templates/console/streams/events.html): n the next page, p the
// previous one (the browser's back), v the next payload view (text, pretty JSON, hex), / the
// search box. Not while typing in a field, nor with a modifier held.
(function () {
  "use strict";
  document.addEventListener("keydown", function (e) {
    var t = e.target;
    if (e.ctrlKey || e.metaKey || e.altKey || (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName)))) return;
    var next = document.querySelector("[data-key=next]");
    if (e.key === "n" && next) { next.click(); }
    else if (e.key === "p") { history.back(); }
    else if (e.key === "v") {
      var select = document.querySelector("select[name=format]");
      if (!select) return;
      select.selectedIndex = (select.selectedIndex + 1) % select.options.length;
      select.form.submit();
    } else if (e.key === "/") {
      var box = document.querySelector("input[name=contains]");
      if (box) { box.focus(); e.preventDefault(); }
    } else { return; }
  });
})();
