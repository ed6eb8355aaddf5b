// The HTML page's tables (tools/html/report.html): leaks grouped by location
// with their callers, growth suspects, the peak, phases, pool regions and
// PyTorch's blocks. Uses helpers.js.
"use strict";
function leakTables() {
  var sec = document.getElementById("gw-leaks");
  sec.querySelector("h2").textContent = runFailed ? "Device memory live when the run failed"
      : atExit ? "Leaks: device memory live at exit"
               : "Device memory live when the report was written";
  [["device", "Device memory"], ["host", "Pinned host memory"]].forEach(function (which) {
    var s = get(doc, ["leaks", which[0]], null);
    if (!s || (which[0] === "host" && !num(s.bytes))) return;
    var sites = arr(s.sites);
    if (which[0] === "host") sec.appendChild(el("h3", null, which[1]));
    var leaked = "leaked_bytes" in s ? num(s.leaked_bytes) : num(s.bytes);
    sec.appendChild(note(bytes(s.bytes) + " live in " + num(s.count) + " allocations from " +
        sites.length + (sites.length === 1 ? " site" : " sites") + "; " + bytes(leaked) + " leaked" +
        (num(s.categorized_bytes) ? ", " + bytes(s.categorized_bytes) + " kept by libraries" : "") +
        (num(s.suppressed_bytes) ? ", " + bytes(s.suppressed_bytes) + " suppressed" : "") +
        (num(s.omitted_bytes) ? "; " + bytes(s.omitted_bytes) + " in " + num(s.omitted_sites) +
         " sites the report omitted" : "") + "."));
    if (!sites.length) return;
    var groups = groupByLocation(sites);
    var rows = [];
    groups.slice(0, TOP).forEach(function (g) { rows.push(leakRow(g)); });
    var rest = groups.slice(TOP);
    if (rest.length) rows.push(moreRow(rest, 4));
    sec.appendChild(table([">bytes", ">allocations", ">oldest", "site"], rows));
    appendAll(sec, num(s.omitted_sites) ? note(num(s.omitted_sites) + " more sites (" +
        bytes(s.omitted_bytes) + ") are not in the report.") : null);
  });
}
// Sites that share a location (the top frame's file:line and function)
// make one row, largest first: a program allocating through one helper
// line from 1,000 call paths gets one row, with its callers under it.
function groupByLocation(sites) {
  var groups = [], byKey = {};
  sites.forEach(function (s) {
    var k = str(s.location) + "\u0000" + fnOf(s);
    var g = byKey[k];
    if (!g) {
      g = byKey[k] = {sites: [], bytes: 0, count: 0, oldest: -1};
      groups.push(g);
    }
    g.sites.push(s);
    g.bytes += num(s.bytes);
    g.count += num(s.count);
    if ("oldest_ns" in s && (g.oldest < 0 || num(s.oldest_ns) < g.oldest)) g.oldest = num(s.oldest_ns);
  });
  groups.sort(function (a, b) { return b.bytes - a.bytes; });
  return groups;
}
// "and N more sites, B bytes": the last row of a capped table.
function moreRow(groups, columns) {
  var n = 0, b = 0;
  groups.forEach(function (g) { n += g.sites ? g.sites.length : 1; b += num(g.bytes); });
  return summaryRow(n, b, columns, "site", "sites", "");
}
// The distinguishing caller of each site of a group: the first frame
// where its stack differs from every other's (sorted by stack, a site's
// nearest stacks are its neighbours).
function frameKey(f) { return frameText(f) + "@" + frameWhere(f); }
function callersOf(sites) {
  var items = sites.map(function (s) { return {site: s, frames: framesOf(s)}; });
  items.forEach(function (it) { it.keys = it.frames.map(frameKey); });
  function cmp(a, b) {
    for (var i = 0; i < Math.min(a.keys.length, b.keys.length); i++) {
      if (a.keys[i] !== b.keys[i]) return a.keys[i] < b.keys[i] ? -1 : 1;
    }
    return a.keys.length - b.keys.length;
  }
  function lcp(a, b) {
    var i = 0;
    while (i < a.keys.length && i < b.keys.length && a.keys[i] === b.keys[i]) i++;
    return i;
  }
  items.sort(cmp);
  items.forEach(function (it, i) {
    var d = 0;
    if (i > 0) d = Math.max(d, lcp(it, items[i - 1]));
    if (i + 1 < items.length) d = Math.max(d, lcp(it, items[i + 1]));
    it.caller = it.frames[d] || null;
  });
  items.sort(function (a, b) { return num(b.site.bytes) - num(a.site.bytes); });
  return items;
}
function leakRow(g) {
  var first = g.sites[0];
  var cells = [numCell(bytes(g.bytes)), numCell(String(g.count)),
               numCell(g.oldest >= 0 ? seconds(g.oldest) : "\u2013")];
  if (g.sites.length === 1) {
    var one = siteCell(first);
    appendAll(one, sizesChart(sizesOf(g.sites)));
    return el("tr", {"class": "gw-leak-row", "data-location": str(first.location)}, cells.concat([one]));
  }
  var td = siteCell(first);
  // Its stack is one of many: the callers below have theirs.
  var own = td.querySelector("details.gw-stack");
  if (own) own.parentNode.removeChild(own);
  td.querySelector("div").appendChild(el("span", {"class": "tag"}, g.sites.length + " call paths"));
  appendAll(td, sizesChart(sizesOf(g.sites)));
  var button = el("button", {"type": "button", "class": "gw-expand"}, "show the " + g.sites.length + " callers");
  td.appendChild(el("div", null, button));
  var row = el("tr", {"class": "gw-leak-row gw-leak-group", "data-location": str(first.location),
                      "data-paths": String(g.sites.length)}, cells.concat([td]));
  var shown = null;
  button.addEventListener("click", function () {
    if (shown) {
      shown.forEach(function (r) { r.parentNode.removeChild(r); });
      shown = null;
      button.textContent = "show the " + g.sites.length + " callers";
      return;
    }
    var items = callersOf(g.sites);
    shown = items.slice(0, TOP).map(function (it) {
      var c = it.caller;
      var cell = el("td", {"style": "padding-left:28px"}, [
        el("span", {"class": "fn"}, "called from "),
        el("span", {"class": "loc gw-caller"}, c ? frameText(c) : "(the same stack)"),
        c && frameWhere(c) ? el("span", {"class": "fn"}, "  " + frameWhere(c)) : null]);
      if (it.frames.length) cell.appendChild(stackDetails(it.frames));
      appendAll(cell, sizesChart(sizesOf([it.site])));
      return el("tr", {"class": "gw-leak-caller"}, [numCell(bytes(it.site.bytes)),
          numCell(String(num(it.site.count))),
          numCell("oldest_ns" in it.site ? seconds(it.site.oldest_ns) : "\u2013"), cell]);
    });
    if (items.length > TOP) {
      shown.push(moreRow(items.slice(TOP).map(function (it) { return {bytes: it.site.bytes}; }), 4));
    }
    var after = row.nextSibling;
    shown.forEach(function (r) { row.parentNode.insertBefore(r, after); });
    button.textContent = "hide the callers";
  });
  return row;
}
function sparkline(series) {
  var w = 120, h = 26, max = 1;
  series.forEach(function (v) { max = Math.max(max, num(v)); });
  var d = "";
  series.forEach(function (v, i) {
    d += (i ? "L" : "M") + (series.length > 1 ? i * w / (series.length - 1) : w / 2).toFixed(1) + "," +
         (h - 2 - (h - 4) * num(v) / max).toFixed(1);
  });
  return svg("svg", {width: w, height: h, viewBox: "0 0 " + w + " " + h},
             [svg("path", {d: d, fill: "none", stroke: "#e15759", "stroke-width": "1.6"})]);
}
// Memory by phase: the phases section as a tree.
function phaseTable() {
  var sec = document.getElementById("gw-phases");
  var ph = get(doc, ["phases"], null);
  var paths = arr(get(ph, ["paths"], []));
  if (!paths.length) {
    sec.appendChild(note("No phases: the program opened no NVTX range and called no gpuwatch_phase_push."));
    return;
  }
  sec.appendChild(note("Peak: device memory while the phase was open, phases nested in it included; " +
                       "allocated, live and copied: in the phase itself."));
  var rows = paths.slice(0, 3 * TOP).map(function (p) {
    var path = str(p.path), depth = Math.max(1, num(p.depth));
    var copied = 0;
    Object.keys(p.copies || {}).forEach(function (k) { copied += num(get(p, ["copies", k, "bytes"], 0)); });
    var name = el("td", {"class": "loc", "style": "padding-left:" + (8 + 16 * (depth - 1)) + "px",
                         "title": path}, base(path));
    return el("tr", {"class": "gw-phase-row", "data-path": path}, [
      name, numCell(bytes(p.peak_bytes)), el("td", {"class": "loc"}, str(get(p, ["peak_site", "location"], ""))),
      el("td", {"class": "loc gw-phase-top"}, p.peak_top_site ?
         str(p.peak_top_site.location) + " (" + bytes(p.peak_top_site.bytes) + ")" : ""),
      numCell(bytes(p.alloc_bytes)), numCell(String(num(p.allocs))), numCell(bytes(p.live_bytes)),
      numCell(bytes(copied)), numCell(String(num(p.launches)))]);
  });
  sec.appendChild(table(["phase", ">peak", "peak reached at", "most held at the peak by", ">allocated",
                         ">allocations", ">live",
                         ">copied", ">launches"], rows));
  appendAll(sec, more(Math.min(3 * TOP, paths.length), paths.length, "phases"));
  var notes = [];
  if (num(ph.unbalanced_pops)) notes.push(num(ph.unbalanced_pops) + " pops with no range open");
  if (num(ph.open_at_thread_exit)) notes.push(num(ph.open_at_thread_exit) + " ranges left open when a thread ended");
  if (num(ph.names_dropped) + num(ph.paths_dropped)) {
    notes.push((num(ph.names_dropped) + num(ph.paths_dropped)) + " ranges past the limits, under (other)");
  }
  if (notes.length) sec.appendChild(note(notes.join("; ") + "."));
}
// Pool regions still registered (NVTX's memory extension): each site that
// registered them, the line that asked the pool, the allocation holding them.
// The process's findings (allocation churn, contexts made and destroyed), in
// the words of the text report; the section stays hidden when there are none.
function findingsList() {
  var findings = arr(doc.page_findings);  // [[type, text]]
  if (!findings.length) return;
  var sec = document.getElementById("gw-findings");
  sec.hidden = false;
  var ul = el("ul", {"class": "findings"});
  findings.forEach(function (f) {
    var type = str(arr(f)[0]);
    ul.appendChild(el("li", {"data-gw-finding": type},
                      [el("span", {"class": "tag bad"}, type), " ", str(arr(f)[1])]));
  });
  sec.appendChild(ul);
}

function regionTable() {
  var sec = document.getElementById("gw-regions");
  var rg = get(doc, ["regions"], null);
  if (!rg) {
    sec.appendChild(note("No pool regions: no allocator declared its blocks with NVTX's memory extension."));
    return;
  }
  var sites = arr(rg.sites);
  sec.appendChild(note(bytes(rg.live_bytes) + " in " + num(rg.live_count) + " regions " +
                       (atExit ? "left registered" : "registered") + ", by the stack that registered them" +
                       (num(rg.outside_count) ? "; " + num(rg.outside_count) +
                        " in no live allocation (freed under them, or not device memory)" : "") + "."));
  if (!sites.length) return;
  sec.appendChild(table([">bytes", ">regions", "registered at", "asked for at", "inside the allocation at"],
    cappedRows(sites, function (s) {
      var inside = str(get(s, ["segment", "location"], ""));
      return el("tr", {"class": "gw-region-row", "data-caller": str(s.caller)}, [
        numCell(bytes(s.bytes)), numCell(String(num(s.count))), siteCell(s),
        el("td", {"class": "loc"}, str(s.caller)),
        el("td", {"class": "loc gw-region-segment"}, inside || "(none live)")]);
    }, 5, "bytes", "site", "sites", "")));
}
// PyTorch's segments (gpuwatch run --torch-blocks), each under the gpuwatch
// site that made it, with its blocks and their Python lines; no section
// when the report has none.
function torchBlockTable() {
  var sec = document.getElementById("gw-torch-blocks");
  var tb = get(doc, ["torch_blocks"], null);
  if (!tb) { sec.parentNode.removeChild(sec); return; }
  var segments = arr(tb.segments);
  sec.appendChild(note("torch.cuda.memory._snapshot() at " + str(tb.moment) + ": " +
                       bytes(tb.reserved_bytes) + " reserved, " + bytes(tb.allocated_bytes) +
                       " allocated, in " + num(tb.segment_count) +
                       (num(tb.segment_count) === 1 ? " segment." : " segments.")));
  var states = {active_allocated: "allocated", inactive: "free", active_pending_free: "pending free"};
  var rows = [];
  segments.slice(0, TOP).forEach(function (s) {
    rows.push(el("tr", {"class": "gw-torch-segment"}, [
      el("td", {"class": "loc"}, "segment " + str(s.address) + " (" + str(s.pool) + ")"),
      numCell(bytes(s.reserved_bytes)), numCell(bytes(s.allocated_bytes)),
      el("td", {"class": "loc"}, s.location ? "made at " + str(s.location) : "(no live gpuwatch allocation)")]));
    arr(s.blocks).slice(0, TOP).forEach(function (b) {
      var frames = arr(b.frames).map(str);
      rows.push(el("tr", {"class": "gw-torch-block", "title": frames.join("\n"),
                          "data-location": str(b.location || "")}, [
        el("td", {"class": "loc", "style": "padding-left:24px"}, states[str(b.state)] || str(b.state)),
        numCell(bytes(b.size)), numCell(str(b.state) === "active_allocated" ? bytes(b.size) : ""),
        el("td", {"class": "loc"}, str(b.location || ""))]));
    });
  });
  var rest = segments.slice(TOP);
  if (rest.length) {
    var b = 0;
    rest.forEach(function (s) { b += num(s.reserved_bytes); });
    rows.push(summaryRow(rest.length, b, 4, "segment", "segments", "reserved"));
  }
  sec.appendChild(table(["segment / block", ">size", ">allocated", "Python line"], rows));
}
function growthTable() {
  var sec = document.getElementById("gw-growth");
  var g = doc.growth;
  if (!g || typeof g !== "object") { sec.appendChild(note("This report has no growth section.")); return; }
  var suspects = arr(g.suspects);
  var basis = str(g.basis);
  sec.appendChild(note(basis === "none" || !basis
      ? "No samples: no gpuwatch_mark() calls, and the run was shorter than one sampling interval."
      : "Sites whose live memory keeps rising over " + num(g.samples) +
        (basis === "mark" ? " marks" : " samples over time") + "; judged on the samples alone, so " +
        "memory freed before exit still shows."));
  if (!suspects.length) { sec.appendChild(note("No growth suspects.")); return; }
  var rows = cappedRows(suspects, function (s) {
    var unit = str(s.unit) === "mark" ? "mark" : "s";
    var window = bytes(s.first_bytes) + " \u2192 " + bytes(s.last_bytes) + ", " +
        (unit === "mark" ? "marks " + num(s.from) + "\u2013" + num(s.to)
                         : num(s.from).toFixed(1) + "\u2013" + num(s.to).toFixed(1) + " s");
    var spark = el("td");
    spark.appendChild(arr(s.series).length > 1 ? sparkline(arr(s.series)) : document.createTextNode("\u2013"));
    return el("tr", null, [numCell("+" + bytes(Math.max(0, num(s.rate))) + "/" + unit), numCell(window),
                           spark, siteCell(s)]);
  }, 4, "growth_bytes", "suspect", "suspects", "of growth");
  sec.appendChild(table([">rate", ">window", "live bytes per sample", "site"], rows));
}
function peakTable() {
  var sec = document.getElementById("gw-peak");
  var peak = get(doc, ["peak"], {});
  var sites = arr(peak.sites);
  sec.appendChild(note("The high watermark of device memory: " + bytes(peak.device_bytes) +
      (trigger === "merge" ? " (the sum of the processes' peaks, which may have come at different times)" : "") +
      (num(peak.sites_time_ns) ? ", reached " + seconds(peak.sites_time_ns) + " after attach" : "") +
      (sites.length ? ". Live at that moment, by site:" : ".")));
  if (!sites.length) return;
  var rows = sites.slice(0, TOP).map(function (site) {
    var pct = num(peak.sites_at_device_bytes) ? (100 * num(site.bytes) / num(peak.sites_at_device_bytes)) : 0;
    return el("tr", null, [numCell(bytes(site.bytes)), numCell(pct.toFixed(1) + " %"), siteCell(site)]);
  });
  if (sites.length > TOP) rows.push(moreRow(sites.slice(TOP).map(function (s) { return {bytes: s.bytes}; }), 3));
  sec.appendChild(table([">bytes", ">of the peak", "site"], rows));
}
