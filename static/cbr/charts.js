// The console's time-series charts (uPlot, vendored under static/vendor/uplot/). Each element
// [data-charts=ID] holds .ts-chart elements; the series come from the JSON script #ID that the
// page renders (console/stream_views.py, _over_time). Without JavaScript the page shows its tables.
(function () {
  "use strict";
  var COLORS = ["#3056d3", "#12805c", "#b54708", "#7a5af8", "#c4320a", "#0e9384", "#dd2590", "#475467"];

  function bytes(v) {
    if (v == null) return "—";
    var units = ["B", "KiB", "MiB", "GiB", "TiB"], i = 0;
    while (Math.abs(v) >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return (i ? v.toFixed(1) : String(Math.round(v))) + " " + units[i];
  }
  function number(v, digits) {
    if (v == null) return "—";
    return v.toLocaleString(undefined, { maximumFractionDigits: digits == null ? 1 : digits });
  }

  // the time axis in 24-hour UTC, as every other time on the console: "HH:mm", with the date
  // ("MM-DD HH:mm") on the first tick and where the day changes, ticks far enough apart not to meet
  function timeLabels(u, splits) {
    var lastDay = null;
    return splits.map(function (ts) {
      var iso = new Date(ts * 1e3).toISOString(), day = iso.slice(5, 10), hm = iso.slice(11, 16);
      var label = day !== lastDay ? day + " " + hm : hm;
      lastDay = day;
      return label;
    });
  }

  function options(el, title, series, yFormat) {
    return {
      title: title,
      width: Math.max(280, el.clientWidth),
      height: 220,
      tzDate: function (ts) { return uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC"); },
      cursor: { points: { size: 7 } },
      scales: { x: { time: true } },
      axes: [
        { stroke: "#667085", grid: { stroke: "#eef0f3" }, space: 90, values: timeLabels },
        { stroke: "#667085", grid: { stroke: "#eef0f3" }, size: 70,
          values: function (u, vals) { return vals.map(function (v) { return yFormat(v); }); } },
      ],
      series: [{ label: "time (UTC)", value: "{YYYY}-{MM}-{DD} {HH}:{mm}:{ss}" }].concat(series),
    };
  }

  function line(label, i, fmt) {
    return { label: label, stroke: COLORS[i % COLORS.length], width: 2, spanGaps: true,
             points: { show: true, size: 4 }, value: function (u, v) { return fmt(v); } };
  }

  function draw(container) {
    var source = document.getElementById(container.dataset.charts);
    if (!source || typeof uPlot === "undefined") return;
    var d = JSON.parse(source.textContent);
    var groups = Object.keys(d.groups || {}).sort();
    container.querySelectorAll(".ts-chart").forEach(function (el) {
      var kind = el.dataset.chart, data, series, fmt;
      if (kind === "held") {
        // the measured samples, and the truncations as red points on their own times
        var times = d.times.slice(), held = d.held_bytes.slice(), cut = d.times.map(function () { return null; });
        (d.truncations || []).forEach(function (t) {
          var at = 0;
          while (at < times.length && times[at] < t.t) at++;
          times.splice(at, 0, t.t); held.splice(at, 0, null); cut.splice(at, 0, t.held);
        });
        fmt = bytes;
        data = [times, held, cut];
        series = [line("held", 0, bytes),
                  { label: "truncation", stroke: "#c4320a", width: 0, points: { show: true, size: 9, fill: "#c4320a" },
                    value: function (u, v) { return v == null ? "—" : "to " + bytes(v); } }];
        // a size policy's limits as dashed lines, named in the legend
        [["policy max", "max", "#b54708"], ["policy min", "min", "#98a2b3"]].forEach(function (lim) {
          var v = (d.limits || {})[lim[1]];
          if (v == null || !times.length) return;
          data.push(times.map(function () { return v; }));
          series.push({ label: lim[0], stroke: lim[2], width: 1.5, dash: [6, 4], points: { show: false },
                        value: function () { return bytes(v); } });
        });
      } else if (kind === "rates") {
        fmt = function (v) { return number(v) + "/s"; };
        data = [d.times, d.publish_rate].concat(groups.map(function (g) { return d.groups[g].ack_rate; }));
        series = [line("published", 0, fmt)].concat(groups.map(function (g, i) { return line("acked by " + g, i + 1, fmt); }));
      } else {
        fmt = function (v) { return number(v, 0); };
        if (!groups.length) { el.innerHTML = '<p class="muted">No reader group reads this stream.</p>'; return; }
        data = [d.times].concat(groups.map(function (g) { return d.groups[g].lag; }));
        series = groups.map(function (g, i) { return line(g, i + 1, fmt); });
      }
      el.innerHTML = "";
      var chart = new uPlot(options(el, el.dataset.title, series, fmt), data, el);
      window.addEventListener("resize", function () { chart.setSize({ width: Math.max(280, el.clientWidth), height: 220 }); });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-charts]").forEach(draw);
  });
})();
