#!/usr/bin/env python3
"""`gpuwatch report --format html` in a real browser (headless Chromium).

Runs examples/leaky_loop under gpuwatch on the CUDA simulator, renders its
report as HTML and opens the file from disk in headless Chromium, then checks:
  - the page ran to its end (body data-gw-status="ok") with no uncaught error
    and no console.error (the page records them in data-gw-errors), and
    Chromium's log has no "Uncaught";
  - the chart was drawn: one band per site of timeline.sites, one dashed line
    per mark, the peak annotated; the leak site's file:line is on the page;
  - a screenshot shows the chart: the first site's colour fills most of the
    area its band has by the trace's exact events (a small PNG decoder
    below, no PIL);
  - the OOM report of examples/oom has its OOM annotation;
  - the report of a run that failed on a CUDA error (tests/programs/kernel_fault) leads with
    it, the call where it surfaced and the kernels launched before it;
  - the report of tests/programs/nvtx_phases (NVTX ranges) draws one bar per
    range under the chart, a row per phase in tree order, and tags each leak
    with its phase;
  - the report of tests/programs/nvtx_pool (NVTX's memory extension) has a
    row per site of pool regions, with its caller and the allocation that
    holds it;
  - a report with a torch_blocks section (PyTorch's blocks) has a row per
    segment and per block, each block at its Python line; one without has no
    such section;
  - a report whose strings are markup (a hostile function name, location,
    mark label and command) shows them as text: no element is injected and
    the page still runs to its end;
  - the report of tests/html/html_steps (64 MiB at once, then 12 steps of a
    4 MiB scratch buffer, then leaks through one helper line from three
    callers), with a script of the test's added to the page that measures
    what it drew: the total is a step at the 64 MiB allocation (from 0 to
    64 MiB at its exact time), the scratch buffer shows as 12 peaks of
    exactly 68 MiB, no two labels on the chart overlap, the tooltip over the
    allocation names its size and file:line, the leak table has one row for
    the helper line with its three callers under it (largest first), and its
    allocation-size histogram has the bucket counts of the report's sites;
    with a trace of 20 events, the chart marks where the trace starts and
    its steps end at what was live at exit;
  - the report of `html_steps paths` (1,000 call paths through the helper
    line): the page is at most twice the report's size, its leak table is
    one row whose callers are the 1,000 paths (50 shown, then "and 950 more
    sites"), and no stack is rendered until it is opened.
  - a report with 62 growth suspects, transfer sites and region sites
    (capped_tables.py): each table ends with one summary row, "and 12 more
    ..., 12.0 MiB", as the leak tables do.
Exits 77 (ctest's SKIP_RETURN_CODE) when chromium is not installed.
"""
import argparse
import html
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zlib

from capped_tables import check_capped_tables

SKIP = 77
HOSTILE = '</script><img src=x onerror="document.title=\'pwned\'"><!--'
# The first colour of the page's palette (#4e79a7) at fill-opacity 0.85 on white.
BAND_RGB = tuple(round(c * 0.85 + 255 * 0.15) for c in (0x4E, 0x79, 0xA7))


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def run(argv, env=None, cwd=None):
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(argv, env=full_env, cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def chromium(browser, profile, args, url):
    """Runs headless Chromium on `url`; returns (stdout, stderr)."""
    argv = [browser, "--headless=new", "--no-sandbox", "--disable-gpu",
            "--no-first-run", "--no-default-browser-check", "--disable-extensions",
            "--user-data-dir=" + profile, "--enable-logging=stderr", "--v=0",
            "--force-device-scale-factor=1", "--hide-scrollbars", "--window-size=1280,1100"] + \
        args + [url]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    return r.stdout, r.stderr


def decode_png(data, max_rows):
    """RGB rows of an 8-bit RGB or RGBA PNG, the first `max_rows` only."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail("the screenshot is not a PNG")
    pos, idat = 8, b""
    width = height = channels = 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or color not in (2, 6) or interlace != 0:
                fail("unexpected PNG format: depth %d colour type %d" % (depth, color))
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, prev = [], bytearray(stride)
    for y in range(min(height, max_rows)):
        filt = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        c = channels
        if filt == 1:
            for i in range(c, stride):
                line[i] = (line[i] + line[i - c]) & 255
        elif filt == 2:
            for i in range(stride):
                line[i] = (line[i] + prev[i]) & 255
        elif filt == 3:
            for i in range(stride):
                left = line[i - c] if i >= c else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 255
        elif filt == 4:
            for i in range(stride):
                a = line[i - c] if i >= c else 0
                b = prev[i]
                cc = prev[i - c] if i >= c else 0
                p = a + b - cc
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - cc)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else cc)
                line[i] = (line[i] + pred) & 255
        rows.append(line)
        prev = line
    return width, channels, rows


def attr(dom, name):
    m = re.search(r'\b%s="([^"]*)"' % re.escape(name), dom)
    return m.group(1) if m else None


def leak_band_pixels(report, site, dom, width):
    """The screen pixels of `site`'s band on the chart: its exact bytes over
    time from the trace's memory events (each names its site last), scaled as
    the page states (data-gw-x, data-gw-y) to a chart `width` pixels wide."""
    left, pw, tmax, w = (float(v) for v in attr(dom, "data-gw-x").split(","))
    _, ph, ymax = (float(v) for v in attr(dom, "data-gw-y").split(","))
    device, level, since, area = {}, 0, 0, 0.0
    for e in report["trace"]["events"]:
        if e[0] != "mem":
            continue
        delta = e[3] - device.get(e[2], 0)
        device[e[2]] = e[3]
        if len(e) > 4 and e[4] == site:
            area += level * (e[1] - since)
            level, since = level + delta, e[1]
    area += level * (report["process"]["elapsed_ns"] - since)
    scale = width / w
    return area * (pw / tmax) * (ph / ymax) * scale * scale


def check_page_ran(dom, log, what):
    if attr(dom, "data-gw-status") != "ok":
        fail("%s: the page's script did not run to its end (no data-gw-status=\"ok\")" % what)
    errors = attr(dom, "data-gw-errors")
    if errors is not None:
        fail("%s: errors on the page: %s" % (what, errors))
    for line in log.splitlines():
        if "Uncaught" in line:
            fail("%s: chromium logged: %s" % (what, line))


# Added before </body> of a page under test: measures what the page drew and
# acts on it, then writes the results on <html> as JSON (data-gw-test), which
# --dump-dom shows. EVENT_NS is the time of the event to hover.
PROBE = """<script>
(function () {
  var out = {};
  try {
    var svg = document.getElementById("gw-chart-svg");
    out.labels = Array.prototype.map.call(svg.querySelectorAll("text.gw-label"), function (t) {
      var b = t.getBoundingClientRect();
      return [b.left, b.top, b.right, b.bottom, t.textContent];
    });
    var xs = svg.getAttribute("data-gw-x").split(",").map(Number);
    var r = svg.getBoundingClientRect();
    var cx = r.left + (xs[0] + xs[1] * EVENT_NS / xs[2]) * r.width / xs[3];
    document.getElementById("gw-chart-hit").dispatchEvent(new MouseEvent("mousemove",
        {clientX: cx, clientY: r.top + r.height / 2, bubbles: true}));
    out.tip = document.getElementById("gw-chart-tip").textContent;
    out.stacks_before = document.querySelectorAll("ol.stack").length;
    var button = document.querySelector("tr.gw-leak-group button.gw-expand");
    if (button) button.click();
    out.callers = Array.prototype.map.call(document.querySelectorAll("tr.gw-leak-caller .gw-caller"),
                                           function (e) { return e.textContent; });
    out.more = Array.prototype.map.call(document.querySelectorAll("#gw-leaks tr.gw-more"),
                                        function (e) { return e.textContent; });
  } catch (e) {
    out.error = String(e);
  }
  document.documentElement.setAttribute("data-gw-test", JSON.stringify(out));
})();
</script>"""


def probe(browser, profile, page, event_ns):
    """Opens `page` with PROBE added; returns (dom, the probe's results)."""
    probed = page[:-len(".html")] + "-probed.html"
    text = open(page, encoding="utf-8").read()
    at = text.rindex("</body>")
    with open(probed, "w", encoding="utf-8") as f:
        f.write(text[:at] + PROBE.replace("EVENT_NS", str(event_ns)) + text[at:])
    dom, log = chromium(browser, profile, ["--dump-dom"], "file://" + probed)
    check_page_ran(dom, log, os.path.basename(page))
    results = attr(dom, "data-gw-test")
    if results is None:
        fail("%s: the probe did not run" % page)
    results = json.loads(html.unescape(results))
    if "error" in results:
        fail("%s: the probe failed: %s" % (page, results["error"]))
    return dom, results


def path_points(d):
    """The points of an SVG path made of M and L commands."""
    return [(float(x), float(y)) for x, y in re.findall(r"[ML]([0-9.]+),([0-9.]+)", d)]


def source_line(marker):
    """The line of tests/html/html_steps.cu that carries `// HTML:marker`."""
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "html_steps.cu")
    for n, line in enumerate(open(src, encoding="utf-8"), 1):
        if "// HTML:" + marker in line:
            return n
    fail("no HTML:%s in %s" % (marker, src))
    return 0


def check_steps(args, browser, profile, traced, render):
    """html_steps: the chart's steps, labels and tooltip; the grouped leak row
    and its size histogram."""
    mib = 1 << 20
    steps_json = traced("steps", "html_steps", where=args.programs)
    report = json.load(open(steps_json))
    page = render(steps_json, "steps")
    mem = [e for e in report["trace"]["events"] if e[0] == "mem" and e[2] == 0]
    weights = [e for e in mem if e[3] == 64 * mib]
    if not weights or report["trace"]["dropped"] != 0:
        fail("html_steps: no 64 MiB event in the trace: %s" % mem[:4])
    dom, got = probe(browser, profile, page, weights[0][1])
    # The chart's scales, as the page states them.
    left, pw, tmax, _ = (float(v) for v in attr(dom, "data-gw-x").split(","))
    top, ph, ymax = (float(v) for v in attr(dom, "data-gw-y").split(","))

    def px(t):
        return left + pw * t / tmax

    def py(b):
        return top + ph * (1 - b / ymax)

    total = re.search(r'<path d="([^"]*)"[^>]*class="gw-total"', dom)
    if not total:
        fail("html_steps: no total line (class gw-total) on the chart")
    points = path_points(total.group(1))
    # A step at the 64 MiB allocation: straight up from 0 at its time.
    x0, y0, y64 = px(weights[0][1]), py(0), py(64 * mib)
    if not any(abs(a[0] - x0) < 0.15 and abs(b[0] - x0) < 0.15 and abs(a[1] - y0) < 0.15 and
               abs(b[1] - y64) < 0.15 for a, b in zip(points, points[1:])):
        fail("html_steps: the total line does not step from 0 to 64 MiB at x=%.1f: %s"
             % (x0, total.group(1)[:300]))
    # The scratch buffer: 12 peaks of exactly 64 + 4 MiB, nothing higher.
    y68 = py(68 * mib)
    at_peak = [abs(y - y68) < 0.15 for _, y in points]
    peaks = sum(1 for i, hit in enumerate(at_peak) if hit and (i == 0 or not at_peak[i - 1]))
    if peaks != 12 or min(y for _, y in points) < y68 - 0.15:
        fail("html_steps: %d peaks at 68 MiB (y=%.1f), expected 12; highest point y=%.1f"
             % (peaks, y68, min(y for _, y in points)))
    # Labels: none overlaps another; the peak's and some marks' are there.
    labels = got["labels"]
    for i, a in enumerate(labels):
        for b in labels[i + 1:]:
            if a[0] < b[2] - 0.5 and b[0] < a[2] - 0.5 and a[1] < b[3] - 0.5 and b[1] < a[3] - 0.5:
                fail("html_steps: labels overlap: %s and %s" % (a, b))
    texts = [label[4] for label in labels]
    if not any(t.startswith("peak 68.0 MiB") for t in texts) or \
            len([t for t in texts if t.startswith("step ")]) < 4:
        fail("html_steps: the chart's labels are %s" % texts)
    # The tooltip over the 64 MiB allocation: its time, size and site.
    weights_at = "html_steps.cu:%d" % source_line("weights")
    if "+64.0 MiB allocated at " + weights_at not in got["tip"] or "64.0 MiB" not in got["tip"]:
        fail("html_steps: the tooltip over the 64 MiB allocation says %r" % got["tip"])
    # One row for the helper line, its three callers under it, largest first.
    leak_at = "html_steps.cu:%d" % source_line("leak")
    groups = re.findall(r'<tr class="gw-leak-row gw-leak-group" data-location="([^"]*)" '
                        r'data-paths="(\d+)"', dom)
    if groups != [(leak_at, "3")]:
        fail("html_steps: grouped leak rows %s, expected one for %s with 3 paths" % (groups, leak_at))
    callers = got["callers"]
    if len(callers) != 3 or [n for n, c in zip(("CallerC", "CallerB", "CallerA"), callers)
                             if n not in c]:
        fail("html_steps: the helper's callers are %s, expected CallerC, CallerB, CallerA" % callers)
    # Its allocation sizes: 3 x 512 B, 2 x 64 KiB, 1 MiB in the buckets of the report's sites.
    want = [0] * 12
    for site in report["sites"]:
        if site["location"] == leak_at:
            want = [a + b for a, b in zip(want, site["sizes"])]
    if want != [3, 0, 0, 2, 0, 1, 0, 0, 0, 0, 0, 0]:
        fail("html_steps: the report's sizes for %s are %s" % (leak_at, want))
    row = re.search(r'data-location="%s" data-paths="3">(.*?)</tr>' % re.escape(leak_at), dom, re.S)
    shown = re.search(r'class="gw-sizes" data-gw-sizes="([^"]*)"', row.group(1)) if row else None
    if not shown or shown.group(1) != ",".join(map(str, want)):
        fail("html_steps: the helper's size histogram shows %s, expected %s"
             % (shown.group(1) if shown else None, want))

    # The scratch buffer's allocate-and-free loop is the page's one finding,
    # in the text report's words.
    scratch_at = "html_steps.cu:%d" % source_line("scratch")
    found = [html.unescape(re.sub(r"<[^>]+>", "", f)) for f in
             re.findall(r'<li data-gw-finding="alloc_churn">(.*?)</li>', dom, re.S)]
    if re.search(r'<section id="gw-findings"[^>]*hidden', dom) or len(found) != 1 or \
            "12 allocations at %s freed and made again (12 cycles" % scratch_at not in found[0]:
        fail("html_steps: the findings shown are %s, expected the churn at %s" % (found, scratch_at))

    # A trace of 20 events keeps the end of the run: the chart says where it
    # starts, the kept events' levels are on the total line at their times
    # (counted from the devices' levels in the trace), and it ends at what was
    # live at exit (1 MiB + 128 KiB + 1.5 KiB).
    trimmed_json = traced("trimmed", "html_steps", {"GPUWATCH_TRACE_EVENTS": "20"},
                          where=args.programs)
    trimmed = json.load(open(trimmed_json))
    kept = len([e for e in trimmed["trace"]["events"] if e[0] == "mem"])
    if trimmed["trace"]["dropped"] == 0 or kept == 0:
        fail("html_steps with 20 trace events: nothing dropped, or no mem event kept")
    dom, log = chromium(browser, profile, ["--dump-dom"], "file://" + render(trimmed_json, "trimmed"))
    check_page_ran(dom, log, "html_steps, trimmed trace")
    top, ph, ymax = (float(v) for v in attr(dom, "data-gw-y").split(","))
    total = re.search(r'<path d="([^"]*)"[^>]*class="gw-total"', dom)
    last = path_points(total.group(1))[-1] if total else None
    at_exit = top + ph * (1 - (mib + 128 * 1024 + 1536) / ymax)
    left, pw, tmax, _ = (float(v) for v in attr(dom, "data-gw-x").split(","))
    drawn = path_points(total.group(1)) if total else []
    # In each pixel column, the highest and the lowest level of the kept
    # events there are on the line at their times (one device here; the page
    # keeps at most four points a column: the first, lowest, highest, last).
    columns = {}
    for e in trimmed["trace"]["events"]:
        if e[0] == "mem":
            columns.setdefault(int(left + pw * e[1] / tmax), []).append(e)
    wanted = [e for col in columns.values() for e in (min(col, key=lambda e: e[3]),
                                                      max(col, key=lambda e: e[3]))]
    missed = [e for e in wanted if not any(
        abs(x - (left + pw * e[1] / tmax)) < 0.15 and abs(y - (top + ph * (1 - e[3] / ymax))) < 0.15
        for x, y in drawn)]
    if missed:
        fail("html_steps, trimmed trace: events not on the total line: %s" % missed)
    if 'id="gw-trace-start"' not in dom or attr(dom, "data-gw-steps") != str(kept) or \
            not last or abs(last[1] - at_exit) > 0.15:
        fail("html_steps, trimmed trace: start marked %s, %s steps of %d, the total ends at %s "
             "(expected y=%.1f)" % ('id="gw-trace-start"' in dom, attr(dom, "data-gw-steps"), kept,
                                    last, at_exit))
    return page


def check_paths(args, browser, profile, traced, render):
    """html_steps paths: 1,000 call paths through one line; the page's size
    and its grouped, capped leak table."""
    paths_json = traced("paths", "html_steps", where=args.programs, argv=["paths"])
    page = render(paths_json, "paths")
    report_size, page_size = os.path.getsize(paths_json), os.path.getsize(page)
    started = time.monotonic()
    dom, got = probe(browser, profile, page, 0)
    took = time.monotonic() - started
    print("1,000 call paths: report %d bytes, page %d bytes (%.2fx), rendered in %s ms "
          "(chromium --dump-dom %.1f s)" % (report_size, page_size, page_size / report_size,
                                            attr(dom, "data-gw-render-ms"), took))
    if page_size > 2 * report_size:
        fail("the page of 1,000 call paths is %d bytes, over twice its report's %d"
             % (page_size, report_size))
    groups = re.findall(r'class="gw-leak-row gw-leak-group" data-location="[^"]*" data-paths="(\d+)"', dom)
    if groups != ["1000"] or got["stacks_before"] != 0:
        fail("1,000 call paths: grouped rows %s, %d stacks rendered before any was opened"
             % (groups, got["stacks_before"]))
    callers = got["callers"]
    if len(callers) != 50 or len(set(callers)) != 50 or [c for c in callers if "Path<" not in c]:
        fail("1,000 call paths: the callers shown are %s" % callers[:5])
    if len(got["more"]) != 1 or "and 950 more sites, 3.7 MiB" not in got["more"][0]:
        fail("1,000 call paths: the summary row says %s" % got["more"])
    return page


def main():
    ap = argparse.ArgumentParser()
    for flag in ("--cli", "--lib", "--sim-dir", "--examples"):
        ap.add_argument(flag, required=True)
    ap.add_argument("--programs", required=True, help="the e2e test programs (nvtx_phases, nvtx_pool)")
    ap.add_argument("--keep", help="copy the pages and the screenshot to this directory")
    args = ap.parse_args()
    for name in ("cli", "lib", "sim_dir", "examples", "programs"):
        setattr(args, name, os.path.abspath(getattr(args, name)))

    browser = os.environ.get("GPUWATCH_CHROMIUM") or shutil.which("chromium") or \
        shutil.which("chromium-browser")
    if not browser:
        print("SKIP: chromium is not installed (apt-get install chromium); the HTML report "
              "was not checked in a browser")
        return SKIP

    with tempfile.TemporaryDirectory(prefix="gpuwatch-html-") as tmp:
        sim = {"LD_LIBRARY_PATH": args.sim_dir}

        def traced(name, program, extra_env=None, where=None, argv=None):
            out = os.path.join(tmp, name + ".json")
            r = run([args.cli, "run", "-o", out, "--sample-ms", "0", "--library", args.lib,
                     "--", os.path.join(where or args.examples, program)] + (argv or []),
                    dict(sim, **(extra_env or {})), tmp)
            if r.returncode != 0:
                fail("gpuwatch run %s: exit %d: %s" % (program, r.returncode, r.stderr))
            return out

        def render(report, name):
            page = os.path.join(tmp, name + ".html")
            r = run([args.cli, "report", report, "--format", "html", "-o", page])
            if r.returncode != 0 or r.stdout:
                fail("gpuwatch report --format html: exit %d: %s" % (r.returncode, r.stderr))
            return page

        leaky_json = traced("leaky", "leaky_loop")
        report = json.load(open(leaky_json))
        leaky = render(leaky_json, "leaky")
        profile = os.path.join(tmp, "profile")

        # The page ran, and drew what the report holds.
        dom, log = chromium(browser, profile, ["--dump-dom"], "file://" + leaky)
        leaky_dom = dom
        check_page_ran(dom, log, "leaky_loop")
        sites = report["timeline"]["sites"]
        marks = report["timeline"]["marks"]["samples"]
        if len(sites) != 1 or len(marks) != 8:
            fail("leaky_loop's timeline: %d sites, %d marks (expected 1 and 8)"
                 % (len(sites), len(marks)))
        if attr(dom, "data-gw-sites") != str(len(sites)):
            fail("the chart says %s sites, the report has %d" % (attr(dom, "data-gw-sites"),
                                                                 len(sites)))
        bands = re.findall(r'<path [^>]*class="gw-band gw-site"[^>]*>', dom)
        if len(bands) != len(sites):
            fail("%d site bands drawn for %d sites" % (len(bands), len(sites)))
        if 'data-site="%d"' % sites[0]["site"] not in bands[0]:
            fail("the first band is not site %d: %s" % (sites[0]["site"], bands[0]))
        if not re.search(r'd="M[0-9.]+,[0-9.]+(L[0-9.]+,[0-9.]+){9,}Z"', bands[0]):
            fail("the first band has no area: " + bands[0])
        mark_lines = len(re.findall(r'class="gw-mark"', dom))
        if mark_lines != len(marks):
            fail("%d mark lines drawn for %d marks" % (mark_lines, len(marks)))
        if 'id="gw-peak-mark"' not in dom or "peak 5.8 MiB" not in dom:
            fail("the peak is not annotated on the chart")
        leak_at = report["leaks"]["device"]["sites"][0]["location"]
        if not re.fullmatch(r"leaky_loop\.cu:\d+", leak_at) or leak_at not in dom:
            fail("the leak site %s is not on the page" % leak_at)

        # A screenshot: the chart's region shows the first site's band.
        shot = os.path.join(tmp, "leaky.png")
        _, log = chromium(browser, profile, ["--screenshot=" + shot],
                          "file://" + leaky)
        if not os.path.exists(shot):
            fail("chromium wrote no screenshot: " + log[-2000:])
        left, top, width, height = (int(v) for v in attr(dom, "data-gw-rect").split(","))
        png_width, channels, rows = decode_png(open(shot, "rb").read(), top + height)
        if len(rows) < top + height or left + width > png_width:
            fail("the chart (%s) is outside the screenshot" % attr(dom, "data-gw-rect"))
        band = ink = 0
        for y in range(top, top + height):
            row = rows[y]
            for x in range(left, left + width):
                r, g, b = row[x * channels], row[x * channels + 1], row[x * channels + 2]
                if r + g + b < 735:
                    ink += 1
                if abs(r - BAND_RGB[0]) + abs(g - BAND_RGB[1]) + abs(b - BAND_RGB[2]) < 24:
                    band += 1
        area = width * height
        print("chart %dx%d at (%d,%d): %.1f%% not white, %.1f%% the first site's colour"
              % (width, height, left, top, 100.0 * ink / area, 100.0 * band / area))
        # leaky_loop's leak grows to 2.0 MiB of an 8 MiB axis, in 256 KiB steps
        # at the times the trace gives; when they fall depends on the
        # machine's load (a loaded machine stretches the run before the
        # leak). So the band's expected area is worked out from the trace, as
        # the page's scales state them, and the screenshot must show most of
        # it (edges and the total's line cover a few pixels), and at least
        # 0.2% of the chart, which a chart without the band (0%) cannot pass.
        expected = leak_band_pixels(report, sites[0]["site"], dom, width)
        print("the leak's band: %d pixels expected from the trace, %d seen" % (expected, band))
        if expected < area // 500 or band < 0.7 * expected:
            fail("the chart's region shows too little of the site's band (%d of %d pixels; "
                 "%d expected from the trace)" % (band, area, expected))

        # The OOM report: the banner and the chart's annotation.
        oom_json = traced("oom", "oom", {"GWSIM_DEVICE_MEMORY": str(1 << 30)}) + ".oom-1"
        oom = render(oom_json, "oom")
        dom, log = chromium(browser, profile, ["--dump-dom"], "file://" + oom)
        check_page_ran(dom, log, "oom")
        oom_at = json.load(open(oom_json))["oom"]["location"]
        if 'id="gw-oom-mark"' not in dom or "OOM: cudaMalloc of 256.0 MiB at " + oom_at not in dom:
            fail("the OOM is not annotated on the chart")
        if 'id="gw-oom-banner"' not in dom:
            fail("the OOM banner is missing")

        # A run that failed on a CUDA error (tests/programs/kernel_fault, which exits 1): the
        # page leads with the error, where it surfaced and the kernels launched before it.
        fault_json = os.path.join(tmp, "fault.json")
        r = run([args.cli, "run", "-o", fault_json, "--library", args.lib, "--",
                 os.path.join(args.programs, "kernel_fault")],
                dict(sim, GWSIM_FAULT_KERNEL="Scatter"), tmp)
        if r.returncode != 1:
            fail("kernel_fault: exit %d, expected 1: %s" % (r.returncode, r.stderr))
        fault = render(fault_json, "fault")
        dom, log = chromium(browser, profile, ["--dump-dom"], "file://" + fault)
        check_page_ran(dom, log, "fault")
        sticky = json.load(open(fault_json))["cuda_errors"]["sticky"][0]
        if 'id="gw-cuda-error-banner"' not in dom or \
                "CUDA error cudaErrorIllegalAddress (700) surfaced in cudaMemcpy at " not in dom or \
                sticky["location"] not in dom:
            fail("the CUDA error banner is missing or does not name the call")
        launched = [k["location"] for k in sticky["kernels"]]
        items = re.findall(r'<ol class="gw-kernels-before">(.*?)</ol>', dom, re.S)
        if len(items) != 1 or [l for l in launched if l not in items[0]] or \
                items[0].count("<li>") != len(launched):
            fail("the kernels before the error are not listed: %s" % items)
        if "Device memory live when the run failed" not in dom:
            fail("the live memory of the failed run is shown as leaks")

        # Markup in every string the page shows is shown as text.
        hostile_report = dict(report)
        hostile_report["process"] = dict(report["process"], command=[HOSTILE])
        hostile_report["timeline"] = json.loads(json.dumps(report["timeline"]))
        hostile_report["timeline"]["marks"]["samples"][0]["label"] = HOSTILE
        hostile_report["timeline"]["sites"][0]["location"] = HOSTILE
        leaks = json.loads(json.dumps(report["leaks"]))
        leaks["device"]["sites"][0]["location"] = HOSTILE
        table = json.loads(json.dumps(report["frame_table"]))
        table[leaks["device"]["sites"][0]["stack"][0]]["function"] = HOSTILE
        hostile_report["leaks"] = leaks
        hostile_report["frame_table"] = table
        hostile_json = os.path.join(tmp, "hostile.json")
        json.dump(hostile_report, open(hostile_json, "w"))
        hostile = render(hostile_json, "hostile")
        dom, log = chromium(browser, profile, ["--dump-dom"], "file://" + hostile)
        check_page_ran(dom, log, "hostile")
        # The page has no image of its own: an <img> element can only come from the data.
        if "<img" in dom:
            fail("markup from the report became part of the page")
        shown = HOSTILE.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        if dom.count(shown) < 3:
            fail("the hostile strings are not shown as text (%d times)" % dom.count(shown))

        # Phases: a bar per range under the chart (from the trace's phase
        # events), the phase table in tree order, each leak's phase.
        phases_json = traced("phases", "nvtx_phases", where=args.programs)
        phases_report = json.load(open(phases_json))
        trace = phases_report["trace"]
        bars_expected = {}
        for e in trace["events"]:
            if e[0] == "phase":
                path = trace["phases"][e[4]]
                bars_expected[path] = bars_expected.get(path, 0) + 1
        phases_page = render(phases_json, "phases")
        dom, log = chromium(browser, profile, ["--dump-dom"], "file://" + phases_page)
        check_page_ran(dom, log, "nvtx_phases")
        if attr(dom, "data-gw-spans") != str(sum(bars_expected.values())):
            fail("phase lanes: %s spans drawn, the trace has %d" %
                 (attr(dom, "data-gw-spans"), sum(bars_expected.values())))
        bars = {}
        for path in re.findall(r'class="gw-phase" data-path="([^"]*)"', dom):
            bars[path] = bars.get(path, 0) + 1
        if bars != bars_expected or bars.get("step/forward") != 3:
            fail("phase bars %s, expected %s" % (bars, bars_expected))
        rows = re.findall(r'class="gw-phase-row" data-path="([^"]*)"', dom)
        want_rows = [p["path"] for p in phases_report["phases"]["paths"]]
        if rows != want_rows or rows.index("step") + 1 != rows.index("step/backward"):
            fail("phase table rows %s, expected %s" % (rows, want_rows))
        tags = re.findall(r'gw-phase-tag">in ([^<]*)<', dom)
        if tags[:2] != ["setup", "loader:batch"]:
            fail("leak phase tags %s, expected setup and loader:batch first" % tags)

        # Pool regions: a row per site that registered live regions, in the
        # report's order, with the line that asked the pool and the
        # allocation that holds them.
        pool_json = traced("pool", "nvtx_pool", where=args.programs)
        pool_report = json.load(open(pool_json))
        pool_page = render(pool_json, "pool")
        dom, log = chromium(browser, profile, ["--dump-dom"], "file://" + pool_page)
        check_page_ran(dom, log, "nvtx_pool")
        callers = re.findall(r'class="gw-region-row" data-caller="([^"]*)"', dom)
        want_callers = [site["caller"] for site in pool_report["regions"]["sites"]]
        if callers != want_callers or len(callers) != 3:
            fail("region rows %s, expected %s" % (callers, want_callers))
        inside = re.findall(r'gw-region-segment">([^<]*)<', dom)
        want_inside = [site.get("segment", {}).get("location", "(none live)")
                       for site in pool_report["regions"]["sites"]]
        if inside != want_inside or inside[-1] != "(none live)":
            fail("region segments %s, expected %s" % (inside, want_inside))

        # PyTorch's blocks (--torch-blocks): a row per segment and per block, each block at
        # its Python line; no section in a report without them.
        if 'id="gw-torch-blocks"' in leaky_dom:
            fail("a PyTorch's blocks section in a report without torch_blocks")
        torch_report = dict(report)
        torch_report["torch_blocks"] = {
            "moment": "exit", "reserved_bytes": 20971520, "allocated_bytes": 16777216,
            "segment_count": 1, "block_count": 3,
            "segments": [{"address": "0x7f0000000000", "device": 0, "pool": "large",
                          "reserved_bytes": 20971520, "allocated_bytes": 16777216,
                          "blocks": [
                              {"address": "0x7f0000000000", "size": 4194304,
                               "state": "active_allocated", "location": "train.py:14",
                               "frames": ["/src/train.py:14:<module>"]},
                              {"address": "0x7f0000400000", "size": 12582912,
                               "state": "active_allocated", "location": "train.py:11",
                               "frames": ["/src/train.py:11:make", "/src/train.py:15:<module>"]},
                              {"address": "0x7f0001000000", "size": 4194304,
                               "state": "inactive"}]}]}
        torch_json = os.path.join(tmp, "torch.json")
        with open(torch_json, "w") as f:
            json.dump(torch_report, f)
        torch_page = render(torch_json, "torch")
        dom, log = chromium(browser, profile, ["--dump-dom"], "file://" + torch_page)
        check_page_ran(dom, log, "torch_blocks")
        segments = len(re.findall(r'class="gw-torch-segment"', dom))
        blocks = re.findall(r'class="gw-torch-block"[^>]*data-location="([^"]*)"', dom)
        if segments != 1 or blocks != ["train.py:14", "train.py:11", ""]:
            fail("torch block rows: %d segments, blocks at %s" % (segments, blocks))

        # Tables past 50 rows end with a summary row with bytes.
        def dom_of(page, what):
            dom, log = chromium(browser, profile, ["--dump-dom"], "file://" + page)
            check_page_ran(dom, log, what)
            return dom
        check_capped_tables([report, pool_report], tmp, render, dom_of, fail)

        steps_page = check_steps(args, browser, profile, traced, render)
        paths_page = check_paths(args, browser, profile, traced, render)

        if args.keep:
            os.makedirs(args.keep, exist_ok=True)
            for f in (leaky, oom, hostile, shot, phases_page, pool_page, steps_page, paths_page):
                shutil.copy(f, args.keep)
    print("PASS: the HTML report renders in %s" % os.path.basename(browser))
    return 0


if __name__ == "__main__":
    sys.exit(main())
