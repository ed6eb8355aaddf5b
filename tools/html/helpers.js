// The HTML page's helpers (tools/html/report.html, embedded with it by
// embed.cmake): the report's data, reading it safely, making elements,
// figures as text, sites and their stacks, tables. The page's scripts share
// these as globals: the page is a document of its own, with nothing else on it.
"use strict";
var STARTED = performance.now();
var SVG = "http" + "://www.w3.org/2000/svg";  // a namespace name, never fetched
var doc = JSON.parse(document.getElementById("gw-data").textContent);
var PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
               "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#8cd17d"];
var OTHER = "#bab0ac";

// --- helpers -------------------------------------------------------------
function get(o, path, dflt) {
  for (var i = 0; i < path.length; i++) {
    if (o === null || typeof o !== "object" || !(path[i] in o)) return dflt;
    o = o[path[i]];
  }
  return o === undefined || o === null ? dflt : o;
}
function num(v) { return typeof v === "number" && isFinite(v) ? v : 0; }
function arr(v) { return Array.isArray(v) ? v : []; }
function str(v) { return typeof v === "string" ? v : (v === undefined || v === null ? "" : String(v)); }
function el(tag, attrs, children) {
  var e = document.createElement(tag);
  for (var k in attrs || {}) e.setAttribute(k, attrs[k]);
  appendAll(e, children);
  return e;
}
function svg(tag, attrs, children) {
  var e = document.createElementNS(SVG, tag);
  for (var k in attrs || {}) e.setAttribute(k, attrs[k]);
  appendAll(e, children);
  return e;
}
function appendAll(e, children) {
  if (children === undefined || children === null) return;
  if (!Array.isArray(children)) children = [children];
  children.forEach(function (c) {
    if (c === null || c === undefined) return;
    e.appendChild(typeof c === "object" ? c : document.createTextNode(String(c)));
  });
}
function bytes(n) {
  n = num(n);
  var units = ["B", "KiB", "MiB", "GiB", "TiB"];
  if (Math.abs(n) < 1024) return Math.round(n) + " B";
  var u = 0;
  while (Math.abs(n) >= 1024 && u < 4) { n /= 1024; u++; }
  return n.toFixed(1) + " " + units[u];
}
function seconds(ns) {
  var s = num(ns) / 1e9;
  if (s === 0) return "0 s";
  if (s < 0.001) return (s * 1e6).toFixed(0) + " µs";
  if (s < 1) return (s * 1e3).toFixed(s < 0.01 ? 2 : 1) + " ms";
  return s.toFixed(s < 10 ? 2 : 1) + " s";
}
function clip(text, n) { return text.length > n ? text.slice(0, n - 1) + "\u2026" : text; }
function base(path) { var p = str(path); var i = p.lastIndexOf("/"); return i < 0 ? p : p.slice(i + 1); }
// A site's frames: its own (`frames`), or its `stack` of indices into the
// page's frame table (html_format.cc lists each distinct frame once).
var FRAMES = arr(doc.frame_table);
function framesOf(site) {
  if (!site || typeof site !== "object") return [];
  if (Array.isArray(site.frames)) return site.frames;
  return arr(site.stack).map(function (i) {
    var f = FRAMES[num(i)];
    return f && typeof f === "object" ? f : {};
  });
}
function fnOf(site) { var f = framesOf(site)[0]; return f ? str(f["function"]) : ""; }
function isStartup(f) {
  var fn = str(f && f["function"]);
  return fn.indexOf("__libc_start") === 0 || fn === "_start";
}
function frameWhere(f) {
  if (str(f.file) && num(f.line)) return base(f.file) + ":" + num(f.line);
  return base(f.module);
}
function frameText(f) {
  var fn = str(f["function"]);
  return fn ? fn : (frameWhere(f) || "??");
}

// The stack as a list, made when it is first opened: a page of 1,000 sites
// would otherwise hold 1,000 stacks nobody reads.
function stackList(frames) {
  var list = el("ol", {"class": "stack"});
  frames.forEach(function (f) {
    var where = frameWhere(f);
    list.appendChild(el("li", null, [frameText(f),
      where && where !== frameText(f) ? el("span", {"class": "where"}, "  " + where) : null,
      f.inlined ? el("span", {"class": "where"}, "  (inlined)") : null]));
  });
  return list;
}
function stackDetails(frames, label) {
  var box = el("details", {"class": "gw-stack"}, el("summary", null,
      (label || "stack") + ", " + frames.length + (frames.length === 1 ? " frame" : " frames")));
  box.addEventListener("toggle", function () {
    if (box.open && !box.querySelector("ol")) box.appendChild(stackList(frames));
  });
  return box;
}
// Allocation sizes: a bar per bucket of the report's sites[].sizes (each
// bucket 4 times the last), the counts on hover and in data-gw-sizes.
var SIZE_BUCKETS = ["\u2264 1 KiB", "\u2264 4 KiB", "\u2264 16 KiB", "\u2264 64 KiB", "\u2264 256 KiB",
                    "\u2264 1 MiB", "\u2264 4 MiB", "\u2264 16 MiB", "\u2264 64 MiB", "\u2264 256 MiB",
                    "\u2264 1 GiB", "> 1 GiB"];
var ALLOCS = get(doc, ["site_allocations"], {});
function sizesOf(sites) {
  var sum = null;
  sites.forEach(function (s) {
    var row = ALLOCS[String(num(s.site))];
    if (!Array.isArray(row)) return;
    if (!sum) sum = SIZE_BUCKETS.map(function () { return 0; });
    for (var b = 0; b < SIZE_BUCKETS.length; b++) sum[b] += num(row[3 + b]);
  });
  return sum;
}
function sizesChart(counts) {
  if (!counts) return null;
  var w = 12 * SIZE_BUCKETS.length, h = 22, max = 1, total = 0;
  counts.forEach(function (c) { max = Math.max(max, c); total += c; });
  var bars = [], lines = [];
  counts.forEach(function (c, b) {
    var bh = c ? Math.max(2, (h - 2) * Math.log(1 + c) / Math.log(1 + max)) : 0;
    bars.push(svg("rect", {x: b * 12 + 1, y: (h - 1 - bh).toFixed(1), width: 10, height: bh.toFixed(1),
                           fill: c ? "#4e79a7" : "none"}));
    bars.push(svg("rect", {x: b * 12, y: h - 1, width: 12, height: 1, fill: "#d9dee7"}));
    if (c) lines.push(SIZE_BUCKETS[b] + ": " + c);
  });
  var chart = svg("svg", {width: w, height: h, viewBox: "0 0 " + w + " " + h, "class": "gw-sizes",
                          "data-gw-sizes": counts.join(",")}, bars);
  chart.appendChild(svg("title", null, "allocation sizes (" + total + " allocations)\n" + lines.join("\n")));
  var used = [];
  counts.forEach(function (c, b) { if (c) used.push(b); });
  return el("div", {"class": "fn gw-sizes-box"}, [chart, " " + total + (total === 1 ? " allocation" : " allocations") +
      (used.length ? ", " + (used.length === 1 ? SIZE_BUCKETS[used[0]]
                             : SIZE_BUCKETS[used[0]] + " to " + SIZE_BUCKETS[used[used.length - 1]]) : "")]);
}

// "LOCATION function" with the stack in a <details> under it.
function siteCell(site) {
  var td = el("td");
  var head = el("div", null, [el("span", {"class": "loc"}, str(site.location) || "<no stack>")]);
  if (site.category) head.appendChild(el("span", {"class": "tag"}, "kept by " + str(site.category)));
  if (site.suppressed) head.appendChild(el("span", {"class": "tag"}, "suppressed: " + str(site.suppressed)));
  if (site.phase) head.appendChild(el("span", {"class": "tag gw-phase-tag"}, "in " + str(site.phase)));
  td.appendChild(head);
  if (fnOf(site)) td.appendChild(el("div", {"class": "fn"}, fnOf(site)));
  var frames = framesOf(site);
  if (frames.length) td.appendChild(stackDetails(frames));
  return td;
}
function numCell(text) { return el("td", {"class": "num"}, text); }
function table(headers, rows) {
  var thead = el("tr");
  headers.forEach(function (h) {
    thead.appendChild(el("th", h.charAt(0) === ">" ? {"class": "num"} : null,
                         h.charAt(0) === ">" ? h.slice(1) : h));
  });
  var body = el("tbody");
  rows.forEach(function (r) { body.appendChild(r); });
  return el("table", null, [el("thead", null, thead), body]);
}
function note(text) { return el("p", {"class": "note"}, text); }
function more(shown, total, what) {
  return total > shown ? note("... and " + (total - shown) + " more " + what + " in the report.") : null;
}
var TOP = 50;  // rows per table
// "\u2026 and N more sites, B": the last row of a capped table, across its
// `columns`; `what` says what the bytes are ("" for live bytes).
function summaryRow(n, b, columns, one, many, what) {
  return el("tr", {"class": "gw-more"}, el("td", {"colspan": String(columns), "class": "note"},
      "\u2026 and " + n + " more " + (n === 1 ? one : many) + ", " + bytes(b) + (what ? " " + what : "")));
}
// `rows` of the first TOP `items`, then the summary row of the rest, their
// `field` summed.
function cappedRows(items, rowOf, columns, field, one, many, what) {
  var rows = items.slice(0, TOP).map(rowOf);
  var rest = items.slice(TOP);
  if (!rest.length) return rows;
  var b = 0;
  rest.forEach(function (s) { b += num(s[field]); });
  rows.push(summaryRow(rest.length, b, columns, one, many, what));
  return rows;
}

// --- header, cards, OOM ---------------------------------------------------
var totals = get(doc, ["totals"], {});
var proc = get(doc, ["process"], {});
var trigger = str(doc.trigger);
var leaksDev = get(doc, ["leaks", "device"], {});
var atExit = trigger === "exit" || trigger === "merge" || trigger === "context_destroy";
// The run ended on a sticky CUDA error: what is live was live when it failed.
var runFailed = arr(get(doc, ["cuda_errors", "sticky"], [])).length > 0;
