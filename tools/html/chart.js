// The HTML page's memory chart (tools/html/report.html): device memory over
// time, stacked by site, in steps from the trace's events where it has them,
// its labels, tooltip and the phase lanes under it. Uses helpers.js.
"use strict";
// Points: the samples of both series in time order, plus what the report
// itself knows exactly: nothing at attach, the per-site bytes at the peak,
// and the live bytes at the time the report was written. Where the event
// trace holds memory events (memory_steps: every allocation and free, the
// newest when the ring overflowed), the chart is drawn from them instead,
// as steps: exact, each event's site on hover.
function memorySteps(sites, index) {
  var ms = doc.memory_steps;
  var ev = arr(get(ms, ["events"], []));
  if (ev.length < 4) return null;
  var traceSites = arr(ms.sites);
  var trimmed = num(ms.dropped) > 0;
  var n = Math.floor(ev.length / 4);
  return {from: num(ev[0]), trimmed: trimmed, dropped: num(ms.dropped), count: n,
          last: num(ev[4 * (n - 1)]),
          // The events as points, from `start` (the sites' bytes before the
          // first event), at most four per pixel column of `x` (the first,
          // the lowest, the highest and the last: no peak is lost).
          points: function (start, x) {
            var dev = {}, levels = start.slice(), total = 0, out = [];
            // A trimmed trace counts from each device's first event (its
            // change unknown): from what those events say was live.
            if (trimmed) {
              var first = {};
              for (var k = 0; k < n; k++) {
                var dk = num(ev[4 * k + 1]);
                if (!(dk in first)) { first[dk] = true; total += num(ev[4 * k + 2]); }
              }
            }
            var col = null, bucket = [];
            function flush() {
              var keep = [];
              if (bucket.length <= 4) keep = bucket;
              else {
                var lo = bucket[0], hi = bucket[0];
                bucket.forEach(function (p) { if (p.total < lo.total) lo = p; if (p.total > hi.total) hi = p; });
                keep = [bucket[0], lo, hi, bucket[bucket.length - 1]].filter(function (p, i, a) {
                  return a.indexOf(p) === i;
                }).sort(function (a, b) { return a.seq - b.seq; });
              }
              keep.forEach(function (p) { out.push(p); });
              bucket = [];
            }
            for (var j = 0; j < n; j++) {
              var t = num(ev[4 * j]), d = num(ev[4 * j + 1]), b = num(ev[4 * j + 2]), row = ev[4 * j + 3];
              var before = d in dev ? dev[d] : (trimmed ? b : 0);
              var delta = b - before;
              dev[d] = b;
              total += delta;
              var site = typeof row === "number" && row >= 0 && traceSites[row] ? traceSites[row] : null;
              var i = site ? index[num(site[0])] : undefined;
              if (i !== undefined) levels[i] = Math.max(0, levels[i] + delta);
              var p = {t: t, total: Math.max(0, total), sites: levels.slice(), kind: "event", step: true,
                       delta: delta, where: site ? str(site[1]) : "", seq: j};
              var c = Math.floor(x(t));
              if (c !== col) { flush(); col = c; }
              bucket.push(p);
            }
            flush();
            return out;
          }};
}
function timelineChart() {
  var box = document.getElementById("gw-chart");
  var noteEl = document.getElementById("gw-timeline-note");
  var tl = doc.timeline;
  if (!tl || typeof tl !== "object") {
    noteEl.textContent = "This report has no timeline.";
    return;
  }
  var sites = arr(tl.sites);
  var index = {};
  sites.forEach(function (s, i) { index[num(s.site)] = i; });
  var points = [];
  function addSeries(name, key) {
    arr(get(tl, [name, "samples"], [])).forEach(function (s, j) {
      points.push({t: num(s.time_ns), total: num(s.device_bytes), mark: num(s.mark),
                   label: str(s.label), kind: name,
                   sites: sites.map(function (site) { return num(arr(site[key])[j]); })});
    });
  }
  addSeries("marks", "marks");
  addSeries("periodic", "periodic");
  var samples = points.length;
  function fromList(list) {
    var v = sites.map(function () { return 0; });
    arr(list).forEach(function (s) { if (num(s.site) in index) v[index[num(s.site)]] += num(s.bytes); });
    return v;
  }
  var peak = get(doc, ["peak"], {});
  if (num(peak.sites_time_ns) > 0 && num(peak.sites_at_device_bytes) > 0) {
    points.push({t: num(peak.sites_time_ns), total: num(peak.sites_at_device_bytes), kind: "peak",
                 sites: fromList(peak.sites), list: arr(peak.sites)});
  }
  var end = num(proc.elapsed_ns);
  var endPoint = null;
  if (end > 0) {
    endPoint = {t: end, total: num(totals.device_current_bytes), kind: "end",
                sites: fromList(leaksDev.sites), list: arr(leaksDev.sites)};
    points.push(endPoint);
  }
  points.push({t: 0, total: 0, kind: "start", sites: sites.map(function () { return 0; })});
  points.sort(function (a, b) { return a.t - b.t; });
  var steps = memorySteps(sites, index);
  var W = 1180, H = 380, L = 74, R = 16, T = 24, B = 40;
  var pw = W - L - R, ph = H - T - B;
  var tmax = Math.max(1, points[points.length - 1].t, steps ? steps.last : 0);
  function x(t) { return L + pw * t / tmax; }
  if (steps) {
    // Before the trace: the samples (and attach); from it on: its events,
    // then the end of the run.
    var before = points.filter(function (p) { return p.t < steps.from && p.kind !== "end"; });
    var start = before.length ? before[before.length - 1].sites : sites.map(function () { return 0; });
    if (!steps.trimmed) start = sites.map(function () { return 0; });
    points = (steps.trimmed ? before : before.filter(function (p) { return p.kind === "start"; }))
        .concat(steps.points(start, x));
    if (endPoint && endPoint.t >= points[points.length - 1].t) {
      endPoint.step = true;
      points.push(endPoint);
    }
  }
  var marks = arr(get(tl, ["marks", "samples"], []));
  noteEl.textContent = steps
      ? "Live device bytes after every allocation and free (" + steps.count + " events of the trace" +
        (steps.trimmed ? ", the newest: " + steps.dropped + " older ones were dropped; before the dashed " +
         "line \u201ctrace starts\u201d the " + samples + " samples are joined by straight lines" : "") +
        "), stacked by the " + (sites.length === 1 ? "site" : sites.length + " sites") +
        " that held the most. Hover for each event's size and site."
      : samples
      ? "Live device bytes at " + marks.length + " marks (gpuwatch_mark) and " +
        arr(get(tl, ["periodic", "samples"], [])).length + " periodic samples, " +
        "stacked by the " + (sites.length === 1 ? "site" : sites.length + " sites") +
        " that held the most; the peak and the end " +
        "of the run are exact, between samples the lines only join the dots (the report has no event trace)."
      : "No samples: the program called no gpuwatch_mark() and ran for less than one sampling " +
        "interval. Shown: the start, the peak and the end of the run.";
  var other = points.map(function (p) {
    var s = 0;
    p.sites.forEach(function (b) { s += b; });
    return Math.max(0, p.total - s);
  });
  var hasOther = other.some(function (v) { return v > 0; });

  var ymax = Math.max(1, num(totals.device_peak_bytes), num(peak.device_bytes));
  points.forEach(function (p) { ymax = Math.max(ymax, p.total); });
  var ystep = niceBytesStep(ymax / 5);
  ymax = Math.ceil(ymax * 1.08 / ystep) * ystep;
  function y(b) { return T + ph * (1 - b / ymax); }
  var root = svg("svg", {"viewBox": "0 0 " + W + " " + H, "width": "100%", "role": "img",
                         "aria-label": "device memory over time", "id": "gw-chart-svg",
                         "data-gw-sites": String(sites.length), "data-gw-points": String(points.length),
                         "data-gw-x": [L, pw, tmax, W].join(","), "data-gw-y": [T, ph, ymax].join(","),
                         "data-gw-steps": steps ? String(steps.count) : "0"});
  box.appendChild(root);  // in the page first: the labels are measured where they land
  var grid = svg("g", {"class": "grid"});
  var yaxis = svg("g", {"class": "axis"});
  for (var v = 0; v <= ymax + 1e-9; v += ystep) {
    grid.appendChild(svg("line", {x1: L, x2: W - R, y1: y(v), y2: y(v)}));
    yaxis.appendChild(svg("text", {x: L - 8, y: y(v) + 4, "text-anchor": "end"}, bytes(v)));
  }
  var xstep = niceStep(tmax / 1e9 / 8) * 1e9;
  var xaxis = svg("g", {"class": "axis"});
  for (var tv = 0; tv <= tmax + 1; tv += xstep) {
    xaxis.appendChild(svg("line", {x1: x(tv), x2: x(tv), y1: T + ph, y2: T + ph + 5}));
    xaxis.appendChild(svg("text", {x: x(tv), y: T + ph + 18, "text-anchor": "middle"}, seconds(tv)));
  }
  xaxis.appendChild(svg("line", {x1: L, x2: W - R, y1: T + ph, y2: T + ph}));
  xaxis.appendChild(svg("text", {x: L + pw / 2, y: H - 4, "text-anchor": "middle"}, "time since attach"));
  root.appendChild(grid);
  root.appendChild(yaxis);
  root.appendChild(xaxis);

  // A series' outline: straight between samples, steps between events
  // (the level holds until the next event changes it).
  function forward(values) {
    var d = "";
    points.forEach(function (p, j) {
      if (j && p.step) d += "L" + x(p.t).toFixed(1) + "," + y(values[j - 1]).toFixed(1);
      d += (j ? "L" : "M") + x(p.t).toFixed(1) + "," + y(values[j]).toFixed(1);
    });
    return d;
  }
  function backward(values) {
    var d = "";
    for (var j = points.length - 1; j >= 0; j--) {
      d += "L" + x(points[j].t).toFixed(1) + "," + y(values[j]).toFixed(1);
      if (j && points[j].step) d += "L" + x(points[j].t).toFixed(1) + "," + y(values[j - 1]).toFixed(1);
    }
    return d;
  }
  // Stacked bands, the largest site at the bottom, "other" on top.
  var bands = sites.map(function (s, i) {
    return {values: points.map(function (p) { return p.sites[i]; }), color: PALETTE[i % PALETTE.length],
            name: str(s.location), site: num(s.site), cls: "gw-band gw-site"};
  });
  if (hasOther) {
    bands.push({values: other, color: OTHER, name: sites.length ? "other sites" : "all sites", site: -1,
                cls: "gw-band gw-other"});
  }
  var below = points.map(function () { return 0; });
  var layer = svg("g", {"id": "gw-bands"});
  bands.forEach(function (band) {
    var top = below.map(function (b, j) { return b + band.values[j]; });
    var path = svg("path", {d: forward(top) + backward(below) + "Z", fill: band.color, "fill-opacity": "0.85",
                            stroke: band.color, "stroke-width": "0.8", "class": band.cls,
                            "data-site": String(band.site)});
    path.appendChild(svg("title", null, band.name));
    layer.appendChild(path);
    below = top;
  });
  root.appendChild(layer);
  // The total as a line: above the stacked sites where the report lists more.
  root.appendChild(svg("path", {d: forward(points.map(function (p) { return p.total; })), fill: "none",
                                stroke: "#1d2330", "stroke-width": "1.4", "class": "gw-total"}));

  // Labels never overlap: each takes the first of its places that is
  // free, or is left out (its line still says where, its title what).
  var taken = [];
  var labels = svg("g", {"id": "gw-labels"});
  root.appendChild(labels);
  function label(text, attrs, places) {
    var t = svg("text", attrs, text);
    labels.appendChild(t);
    for (var i = 0; i < places.length; i++) {
      t.setAttribute("x", places[i][0]);
      t.setAttribute("y", places[i][1]);
      t.setAttribute("text-anchor", places[i][2]);
      var b = t.getBBox();
      var area = {x0: b.x - 2, x1: b.x + b.width + 2, y0: b.y - 1, y1: b.y + b.height + 1};
      var inside = area.x0 >= L - 2 && area.x1 <= W - R + 2;
      var free = taken.every(function (o) {
        return area.x1 <= o.x0 || o.x1 <= area.x0 || area.y1 <= o.y0 || o.y1 <= area.y0;
      });
      if (inside && free) {
        taken.push(area);
        return t;
      }
    }
    labels.removeChild(t);
    return null;
  }
  if (doc.oom && typeof doc.oom === "object") {
    var ox = x(end);
    var go = svg("g", {"id": "gw-oom-mark"});
    go.appendChild(svg("line", {x1: ox, x2: ox, y1: T, y2: T + ph, stroke: "#c0392b", "stroke-width": "2"}));
    root.insertBefore(go, labels);
    var oomText = label("OOM: " + str(doc.oom.api) + " of " + bytes(doc.oom.size) + " at " + str(doc.oom.location),
                        {fill: "#c0392b", "font-size": "12", "font-weight": "600", "class": "gw-label"},
                        [[ox - 6, T + 26, "end"], [ox - 6, T + 44, "end"], [ox - 6, T + 62, "end"]]);
    if (oomText) { labels.removeChild(oomText); go.appendChild(oomText); }
  }
  // The peak: its level across the chart and the moment it was captured.
  var pk = num(peak.device_bytes) || num(totals.device_peak_bytes);
  if (pk > 0) {
    var g = svg("g", {"id": "gw-peak-mark"});
    g.appendChild(svg("line", {x1: L, x2: W - R, y1: y(pk), y2: y(pk), stroke: "#c0392b",
                               "stroke-dasharray": "6,4", "stroke-width": "1"}));
    var pt = num(peak.sites_time_ns);
    if (pt) g.appendChild(svg("circle", {cx: x(pt), cy: y(num(peak.sites_at_device_bytes) || pk), r: 4,
                                         fill: "#c0392b"}));
    root.insertBefore(g, labels);
    var lx = pt ? x(pt) : W - R;
    label("peak " + bytes(pk) + (pt ? " at " + seconds(pt) : ""),
          {fill: "#c0392b", "font-size": "12", "font-weight": "600", "class": "gw-label gw-peak-label"},
          [[lx + 8, y(pk) - 6, "start"], [lx - 8, y(pk) - 6, "end"], [lx + 8, y(pk) + 14, "start"],
           [lx - 8, y(pk) + 14, "end"], [W - R, y(pk) - 6, "end"], [L + 4, y(pk) - 6, "start"]]);
  }
  if (steps && steps.trimmed) {
    var sx = x(steps.from);
    var gs = svg("g", {"id": "gw-trace-start"});
    gs.appendChild(svg("line", {x1: sx, x2: sx, y1: T, y2: T + ph, stroke: "#2b59c3",
                                "stroke-dasharray": "2,3", "stroke-width": "1.2"}));
    gs.appendChild(svg("title", null, "the event trace starts here: " + steps.dropped +
                       " older events were dropped; before it, samples"));
    root.insertBefore(gs, labels);
    label("trace starts", {fill: "#2b59c3", "font-size": "10", "class": "gw-label"},
          [[sx + 3, T + ph - 6, "start"], [sx - 3, T + ph - 6, "end"], [sx + 3, T + ph - 20, "start"]]);
  }
  // Marks: a dashed line each, labelled where there is room.
  var ann = svg("g", {"id": "gw-marks"});
  root.insertBefore(ann, labels);
  marks.forEach(function (m) {
    var mx = x(num(m.time_ns));
    // "step 3" as the program said it, else its label and ordinal.
    var said = str(m.label), ordinal = String(num(m.mark));
    var text = clip(said ? (said.slice(-ordinal.length - 1) === " " + ordinal ? said : said + " " + ordinal)
                         : "mark " + ordinal, 20);
    var line = svg("line", {x1: mx, x2: mx, y1: T, y2: T + ph, stroke: "#7a8599",
                            "stroke-dasharray": "3,3", "stroke-width": "0.8", "class": "gw-mark"});
    line.appendChild(svg("title", null, text + " (mark " + num(m.mark) + ", " + seconds(m.time_ns) + ")"));
    ann.appendChild(line);
    var places = [];
    for (var row = 0; row < 3; row++) {
      places.push([mx + 3, T + 10 + 12 * row, "start"]);
      places.push([mx - 3, T + 10 + 12 * row, "end"]);
    }
    label(text, {"font-size": "10", fill: "#5d6677", "class": "gw-label gw-mark-label"}, places);
  });
  // Hover: the nearest point's figures, and the event's size and site.
  var cursor = svg("line", {x1: 0, x2: 0, y1: T, y2: T + ph, stroke: "#1d2330", "stroke-width": "1",
                            visibility: "hidden"});
  root.appendChild(cursor);
  var hit = svg("rect", {x: L, y: T, width: pw, height: ph, fill: "transparent", "id": "gw-chart-hit"});
  root.appendChild(hit);
  var tip = el("div", {"class": "tip", "id": "gw-chart-tip"});
  box.appendChild(tip);
  // Where the chart landed, in page pixels: a screenshot test looks there.
  var at = root.getBoundingClientRect();
  root.setAttribute("data-gw-rect", [at.left + window.scrollX, at.top + window.scrollY, at.width,
                                     at.height].map(Math.round).join(","));
  function nearest(t) {
    var lo = 0, hi = points.length - 1;
    while (hi - lo > 1) {
      var mid = (lo + hi) >> 1;
      if (points[mid].t <= t) lo = mid; else hi = mid;
    }
    return Math.abs(points[lo].t - t) <= Math.abs(points[hi].t - t) ? lo : hi;
  }
  hit.addEventListener("mousemove", function (ev) {
    var r = root.getBoundingClientRect();
    var best = nearest(((ev.clientX - r.left) * W / r.width - L) / pw * tmax);
    var p = points[best];
    cursor.setAttribute("x1", x(p.t));
    cursor.setAttribute("x2", x(p.t));
    cursor.setAttribute("visibility", "visible");
    tip.textContent = "";
    var title = seconds(p.t) + " \u00b7 " + bytes(p.total) +
        (p.kind === "marks" ? " \u00b7 mark " + p.mark + " \u201c" + p.label + "\u201d"
         : p.kind === "peak" ? " \u00b7 the peak" : p.kind === "end" ? " \u00b7 report written"
         : p.kind === "start" ? " \u00b7 attach" : p.kind === "event" ? "" : " \u00b7 periodic sample");
    tip.appendChild(el("div", null, el("strong", null, title)));
    if (p.kind === "event") {
      tip.appendChild(el("div", {"class": "gw-tip-event"},
          (p.delta >= 0 ? "+" + bytes(p.delta) + " allocated" : "\u2212" + bytes(-p.delta) + " freed") +
          (p.where ? " at " + p.where : "")));
    }
    var rows = [];
    bands.forEach(function (band) { if (band.values[best] > 0) rows.push([band.color, band.values[best], band.name]); });
    rows.reverse().slice(0, 12).forEach(function (row) {
      tip.appendChild(el("div", null, [el("span", {"class": "sw", "style": "background:" + row[0]}),
                                       bytes(row[1]) + "  " + row[2]]));
    });
    if (p.list && hasOther) {
      arr(p.list).filter(function (s) { return !(num(s.site) in index); }).slice(0, 5).forEach(function (s) {
        tip.appendChild(el("div", null, "  of other: " + bytes(s.bytes) + "  " + str(s.location)));
      });
    }
    tip.style.display = "block";
    var px = (x(p.t) / W) * r.width;
    tip.style.left = Math.min(px + 12, r.width - 300) + "px";
    tip.style.top = "30px";
  });
  hit.addEventListener("mouseleave", function () {
    tip.style.display = "none";
    cursor.setAttribute("visibility", "hidden");
  });

  phaseLanes(box, L, pw, W, tmax, x);
  var legend = document.getElementById("gw-legend");
  bands.slice().forEach(function (band, i) {
    var s = sites[i];
    legend.appendChild(el("div", {"class": "item"}, [
      el("span", {"class": "sw", "style": "background:" + band.color}),
      el("span", {"class": "loc"}, band.name),
      s ? el("span", {"class": "fn"}, fnOf(s) + " \u00b7 up to " + bytes(s.max_bytes)) : null]));
  });
}
// Phases under the chart, on its time axis: a lane per depth (the fourth
// holds the deeper ones), a bar per range from the event trace's phase
// events (phase_spans), coloured by path, its path and duration on hover.
function phaseLanes(box, L, pw, W, tmax, x) {
  var spans = arr(get(doc, ["phase_spans", "spans"], []));
  var paths = arr(get(doc, ["phase_spans", "paths"], []));
  if (!spans.length) return;
  var LANES = 4, LH = 16;
  function depthOf(path) { return Math.min(LANES, str(path).split("/").length); }
  var used = 1;
  spans.forEach(function (s) { used = Math.max(used, depthOf(paths[num(s[3])])); });
  var H = used * LH + 6;
  var root = svg("svg", {"viewBox": "0 0 " + W + " " + H, "width": "100%", "id": "gw-phase-lanes",
                         "role": "img", "aria-label": "phases over time",
                         "data-gw-spans": String(spans.length)});
  for (var d = 1; d <= used; d++) {
    root.appendChild(svg("text", {x: L - 8, y: (d - 1) * LH + 12, "text-anchor": "end", "font-size": "10",
                                  fill: "#5d6677"}, d === 1 ? "phases" : "depth " + d));
  }
  var bars = svg("g", {"id": "gw-phase-bands"});
  spans.forEach(function (s) {
    var start = num(s[0]), end = Math.max(num(s[1]), start), path = str(paths[num(s[3])]);
    var d = depthOf(path) - 1;
    var x0 = x(Math.min(start, tmax)), x1 = Math.max(x0 + 1, x(Math.min(end, tmax)));
    var color = PALETTE[num(s[3]) % PALETTE.length];
    var bar = svg("rect", {x: x0.toFixed(1), y: d * LH + 2, width: (x1 - x0).toFixed(1), height: LH - 4,
                           fill: color, "fill-opacity": "0.8", "class": "gw-phase", "data-path": path});
    bar.appendChild(svg("title", null, path + ": " + seconds(end - start) + " (thread " + num(s[2]) + ")"));
    bars.appendChild(bar);
  });
  root.appendChild(bars);
  box.appendChild(root);
}

function niceStep(raw) {
  if (!(raw > 0)) return 1;
  var p = Math.pow(10, Math.floor(Math.log10(raw)));
  var n = raw / p;
  return (n <= 1 ? 1 : n <= 2 ? 2 : n <= 2.5 ? 2.5 : n <= 5 ? 5 : 10) * p;
}
function niceBytesStep(raw) {
  if (!(raw > 0)) return 1;
  var unit = 1;
  while (raw >= 1024 * unit && unit < Math.pow(1024, 4)) unit *= 1024;
  var n = raw / unit;
  var steps = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024];
  for (var i = 0; i < steps.length; i++) if (n <= steps[i]) return steps[i] * unit;
  return 1024 * unit;
}
