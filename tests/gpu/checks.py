"""What the reports of the example and test programs must say, on a GPU as on
the simulator.

The same expectations as the end-to-end tests (tests/e2e/*_test.cc), kept to
what does not depend on the hardware: counts, bytes, memory kinds, sites with
file:line, kernel names, findings, host memory kinds of copies. Bandwidths and
durations are the simulator's model and are not checked here.

check(program, ctx) returns a list of (ok, text). ctx holds:
  report_path   the exit report (GPUWATCH_OUTPUT)
  stdout, stderr, exit_code
  attach        the attach mode the report must name ("preload"/"injection")
  source_dir    the repository root (for the marker lines)
  static        True for a static-cudart build
  target        "gpu" or "simulator"
"""

import json
import os
import re

KiB = 1024
MiB = 1024 * KiB


def line_of(path, marker):
    try:
        with open(path) as f:
            for n, line in enumerate(f, 1):
                if marker in line:
                    return n
    except OSError:
        pass
    return 0


def load(path):
    """A report with each site's frames in `frames`, as the tools read it."""
    try:
        with open(path) as f:
            return inline_frame_table(json.load(f))
    except (OSError, ValueError):
        return None


def inline_frame_table(doc):
    """Version 2 reports list each frame once, in `frame_table`; a site names
    its frames by index (`stack`). Puts them back in `frames`."""
    if not isinstance(doc, dict) or not isinstance(doc.get("frame_table"), list):
        return doc
    table = doc.pop("frame_table")

    def inline(site):
        if isinstance(site, dict) and isinstance(site.get("stack"), list):
            stack = site.pop("stack")
            site["frames"] = [table[i] for i in stack
                              if isinstance(i, int) and 0 <= i < len(table)]

    def inline_list(parent, key):
        if isinstance(parent, dict) and isinstance(parent.get(key), list):
            for site in parent[key]:
                inline(site)

    for section in ("peak", "growth", "transfers", "timeline"):
        inline_list(doc.get(section), "sites")
        inline_list(doc.get(section), "suspects")
    for section in (doc.get("leaks") or {}).values():
        inline_list(section, "sites")
    inline_list(doc, "sites")
    inline(doc.get("oom"))
    return doc


def get(obj, *keys, default=None):
    for k in keys:
        if isinstance(obj, dict) and k in obj:
            obj = obj[k]
        elif isinstance(obj, list) and isinstance(k, int) and -len(obj) <= k < len(obj):
            obj = obj[k]
        else:
            return default
    return obj


class Checker:
    def __init__(self):
        self.results = []

    def eq(self, what, actual, expected):
        self.results.append((actual == expected, f"{what} = {actual!r}" +
                             ("" if actual == expected else f", expected {expected!r}")))

    def true(self, what, cond, detail=""):
        self.results.append((bool(cond), what + (f" ({detail})" if detail else "")))


def site_at(section, location):
    for s in get(section, "sites", default=[]) or []:
        if s.get("location") == location:
            return s
    return None


def common(c, report, ctx):
    c.eq("exit status", ctx["exit_code"], ctx.get("expect_exit", 0))
    c.true("report written and valid JSON", report is not None, ctx["report_path"])
    if report is None:
        return False
    c.eq("gpuwatch.attach", get(report, "gpuwatch", "attach"), ctx["attach"])
    c.eq("schema", get(report, "schema"), "gpuwatch-report")
    return True


def check_leaky_loop(c, report, ctx):
    dev = get(report, "totals", "kinds", "device")
    c.eq("device allocs", get(dev, "allocs"), 16)
    c.eq("device frees", get(dev, "frees"), 8)
    c.eq("device current_count", get(dev, "current_count"), 8)
    c.eq("device current_bytes", get(dev, "current_bytes"), 8 * 256 * KiB)
    c.eq("device_peak_bytes", get(report, "totals", "device_peak_bytes"), 7 * 256 * KiB + 4 * MiB)
    c.eq("h2d copies", get(report, "totals", "copies", "h2d", "count"), 8)
    c.eq("h2d bytes", get(report, "totals", "copies", "h2d", "bytes"), 8 * 4 * MiB)
    c.eq("d2h copies", get(report, "totals", "copies", "d2h", "count"), 8)
    c.eq("kernel launches", get(report, "totals", "kernel_launches"), 8)
    c.eq("unknown_frees", get(report, "totals", "unknown_frees"), 0)
    src = os.path.join(ctx["source_dir"], "examples", "leaky_loop.cu")
    loc = f"leaky_loop.cu:{line_of(src, '// leaks')}"
    site = get(report, "leaks", "device", "sites", 0, default={})
    c.eq("leak site", get(site, "location"), loc)
    c.eq("leak site bytes", get(site, "bytes"), 8 * 256 * KiB)
    c.eq("leak site count", get(site, "count"), 8)
    c.eq("leaked device bytes", get(report, "leaks", "device", "bytes"), 8 * 256 * KiB)
    c.eq("transfers.unmatched_records", get(report, "transfers", "unmatched_records"), 0)
    kernels = get(report, "kernels", "kernels", default=[]) or []
    c.true("kernel Scale named", any("Scale" in (k.get("name") or "") for k in kernels),
           ", ".join(k.get("name", "?") for k in kernels))


def check_api_mix(c, report, ctx):
    kinds = get(report, "totals", "kinds")
    c.eq("device allocs", get(kinds, "device", "allocs"), 6)
    c.eq("device frees", get(kinds, "device", "frees"), 4)
    c.eq("device current_bytes", get(kinds, "device", "current_bytes"), 1 * MiB + 256 * KiB)
    c.eq("pool allocs", get(kinds, "pool", "allocs"), 2)
    c.eq("pool current_bytes", get(kinds, "pool", "current_bytes"), 512 * KiB)
    c.eq("managed current_bytes", get(kinds, "managed", "current_bytes"), 2 * MiB)
    c.eq("vmm allocs", get(kinds, "vmm", "allocs"), 2)
    c.eq("vmm frees", get(kinds, "vmm", "frees"), 1)
    c.eq("vmm current_bytes", get(kinds, "vmm", "current_bytes"), 2 * MiB)
    c.eq("pinned_host allocs", get(kinds, "pinned_host", "allocs"), 2)
    c.eq("pinned_host current_bytes", get(kinds, "pinned_host", "current_bytes"), 64 * KiB)
    c.eq("device_current_bytes", get(report, "totals", "device_current_bytes"), 5 * MiB + 768 * KiB)
    c.eq("host_current_bytes", get(report, "totals", "host_current_bytes"), 64 * KiB)
    copies = get(report, "totals", "copies")
    c.eq("h2d count", get(copies, "h2d", "count"), 12)
    c.eq("h2d bytes", get(copies, "h2d", "bytes"), 1 * MiB + 40 * KiB + 256 * KiB)
    c.eq("d2h count", get(copies, "d2h", "count"), 2)
    c.eq("d2h bytes", get(copies, "d2h", "bytes"), 1 * MiB + 256 * KiB)
    c.eq("d2d count", get(copies, "d2d", "count"), 1)
    c.eq("kernel launches", get(report, "totals", "kernel_launches"), 5)
    c.eq("unknown_frees", get(report, "totals", "unknown_frees"), 0)


def check_leak_sites(c, report, ctx):
    src = os.path.join(ctx["source_dir"], "tests", "e2e", "programs", "leak_sites.cu")

    def at(name):
        return f"leak_sites.cu:{line_of(src, '// LEAK:' + name)}"

    device = get(report, "leaks", "device", default={})
    expected = [("device", 6 * MiB, 2, "device"), ("pool", 1 * MiB, 1, "pool"),
                ("managed", 2 * MiB, 1, "managed"), ("driver", 768 * KiB, 1, "device"),
                ("vmm", 4 * MiB, 1, "vmm")]
    total = 0
    for name, nbytes, count, kind in expected:
        site = site_at(device, at(name))
        c.true(f"leak site {name} at {at(name)}", site is not None,
               "sites: " + ", ".join(s.get("location", "?") for s in device.get("sites", [])))
        if site is None:
            continue
        c.eq(f"{name} bytes", site.get("bytes"), nbytes)
        c.eq(f"{name} count", site.get("count"), count)
        c.eq(f"{name} kind bytes", get(site, "kinds", kind), nbytes)
        c.eq(f"{name} frames[0].line", get(site, "frames", 0, "line"),
             line_of(src, "// LEAK:" + name))
        total += nbytes
    c.eq("leaked device bytes", device.get("bytes"), total)
    c.eq("leak sites", len(device.get("sites", [])), len(expected))
    host = get(report, "leaks", "host", default={})
    c.eq("pinned leak site", get(host, "sites", 0, "location"), at("pinned"))
    c.eq("pinned leaked bytes", host.get("bytes"), 96 * KiB)


def check_threads(c, report, ctx):
    dev = get(report, "totals", "kinds", "device")
    c.eq("device allocs", get(dev, "allocs"), 40000)
    c.eq("device frees", get(dev, "frees"), 39996)
    c.eq("device current_count", get(dev, "current_count"), 4)
    c.eq("device current_bytes", get(dev, "current_bytes"), 4 * 4096 + 0 + 1 + 2 + 3)
    c.eq("unknown_frees", get(report, "totals", "unknown_frees"), 0)


def check_snapshot_signal(c, report, ctx):
    c.eq("stdout", ctx["stdout"], "snapshot_signal: snapshot seen\n")
    snap = load(ctx["report_path"] + ".snapshot-1")
    c.true("snapshot report written", snap is not None)
    c.eq("snapshot label", get(snap, "label"), "signal")
    c.eq("snapshot device_current_bytes", get(snap, "totals", "device_current_bytes"), 6 * MiB)
    c.eq("exit report device_current_bytes", get(report, "totals", "device_current_bytes"), 0)


def find_total(report, direction, host):
    for t in get(report, "transfers", "totals", default=[]) or []:
        if t.get("direction") == direction and t.get("host") == host:
            return t
    return None


def finding(report, kind, location):
    for f in get(report, "transfers", "findings", default=[]) or []:
        if f.get("type") == kind and f.get("location") == location:
            return f
    return None


def check_transfers(c, report, ctx):
    c.eq("stdout", ctx["stdout"], "transfers: done\n")
    src = os.path.join(ctx["source_dir"], "tests", "e2e", "programs", "transfers.cu")

    def at(name):
        return f"transfers.cu:{line_of(src, '// AT:' + name)}"

    pageable = find_total(report, "h2d", "pageable")
    c.true("h2d pageable total present", pageable is not None)
    if pageable:
        c.eq("h2d pageable count", pageable.get("count"), 6)
        c.eq("h2d pageable bytes", pageable.get("bytes"), 6 * MiB)
    pinned = find_total(report, "h2d", "pinned")
    c.true("h2d pinned total present", pinned is not None)
    if pinned:
        c.eq("h2d pinned count", pinned.get("count"), 204)
        c.eq("h2d pinned bytes", pinned.get("bytes"), 4 * MiB + 200 * 4 * KiB)
    d2h = find_total(report, "d2h", "pageable")
    c.true("d2h pageable total present", d2h is not None)
    if d2h:
        c.eq("d2h pageable count", d2h.get("count"), 20)
        c.eq("d2h pageable bytes", d2h.get("bytes"), 20 * 256 * KiB)
    c.eq("h2d copies", get(report, "totals", "copies", "h2d", "count"), 210)
    c.eq("transfers.unmatched_records", get(report, "transfers", "unmatched_records"), 0)
    small = finding(report, "small_copies", at("small"))
    c.true("small_copies finding at " + at("small"), small is not None)
    if small:
        c.eq("small_copies count", small.get("count"), 200)
    sync = finding(report, "sync_d2h_loop", at("sync_d2h"))
    c.true("sync_d2h_loop finding at " + at("sync_d2h"), sync is not None)
    if sync:
        c.eq("sync_d2h_loop count", sync.get("count"), 20)
    pg = finding(report, "pageable", at("pageable"))
    c.true("pageable finding at " + at("pageable"), pg is not None)
    if pg:
        c.eq("pageable count", pg.get("count"), 4)
    kernels = get(report, "kernels", default={})
    c.eq("kernels.launches", kernels.get("launches"), 10)
    names = [(k.get("name"), k.get("launches")) for k in kernels.get("kernels", [])]
    c.eq("kernels", names, [("void (anonymous namespace)::Fill<4>(float*)", 7),
                            ("(anonymous namespace)::Other(float*)", 3)])
    life = get(report, "lifecycle", default={})
    c.eq("blocked copy count", get(life, "blocked", "copy", "count"), 26)
    c.eq("blocked stream count", get(life, "blocked", "stream", "count"), 1)
    c.eq("blocked device count", get(life, "blocked", "device", "count"), 1)
    c.eq("exit_status", life.get("exit_status"), 0)
    # The runtime's teardown at exit reports no context destruction on the
    # 580 driver (first GPU run), nor on the simulator unless
    # GWSIM_EXIT_CONTEXT_DESTROY=1: nothing to time.
    c.eq("teardown_ns (no context destroyed at exit)", life.get("teardown_ns"), None)


def check_oom(c, report, ctx):
    c.true("stdout names the failure", ctx["stdout"].startswith("oom: cudaMalloc failed after"),
           ctx["stdout"].strip())
    oom = load(ctx["report_path"] + ".oom-1")
    c.true("oom report written", oom is not None)
    if oom is None:
        return
    src = os.path.join(ctx["source_dir"], "examples", "oom.cu")
    loc = f"oom.cu:{line_of(src, 'fails when the device is full')}"
    c.eq("trigger", oom.get("trigger"), "oom")
    c.eq("oom.size", get(oom, "oom", "size"), 256 * MiB)
    c.eq("oom.kind", get(oom, "oom", "kind"), "device")
    c.eq("oom.location", get(oom, "oom", "location"), loc)
    c.true("oom.device_total_bytes > 0", (get(oom, "oom", "device_total_bytes") or 0) > 0)
    c.eq("live site at the failure", get(oom, "leaks", "device", "sites", 0, "location"), loc)
    c.eq("one OOM report", load(ctx["report_path"] + ".oom-2"), None)


def check_pool_and_driver(c, report, ctx):
    kinds = get(report, "totals", "kinds", default={})
    c.true("pool memory leaked", (get(kinds, "pool", "current_bytes") or 0) >= 8 * MiB,
           f"pool current_bytes {get(kinds, 'pool', 'current_bytes')}")
    c.true("driver memory leaked", (get(kinds, "device", "current_bytes") or 0) >= 2 * MiB,
           f"device current_bytes {get(kinds, 'device', 'current_bytes')}")
    c.eq("unknown_frees", get(report, "totals", "unknown_frees"), 0)


def check_exit_with(c, report, ctx):
    c.eq("device current_bytes", get(report, "totals", "kinds", "device", "current_bytes"), 1 * MiB)
    c.eq("lifecycle.exit_status", get(report, "lifecycle", "exit_status"), ctx.get("expect_exit"))


def at(ctx, program, marker):
    src = os.path.join(ctx["source_dir"], "tests", "e2e", "programs", program)
    return f"{program}:{line_of(src, marker)}"


def copies(report, direction):
    return get(report, "totals", "copies", direction, "count", default=0)


def check_reuse_race(c, report, ctx):
    # Freed addresses handed to another thread's allocation before the free
    # returned: none of the 250 kept blocks may be lost (tests/e2e/fidelity_test.cc).
    c.true("stdout", ctx["stdout"].startswith("reuse_race: done"), ctx["stdout"].strip())
    dev = get(report, "totals", "kinds", "device")
    c.eq("device allocs", get(dev, "allocs"), 2000)
    c.eq("device frees", get(dev, "frees"), 1750)
    c.eq("device live", get(report, "totals", "device_live_count"), 250)
    c.eq("unknown_frees", get(report, "totals", "unknown_frees"), 0)
    c.eq("leak site", get(report, "leaks", "device", "sites", 0, "location"),
         at(ctx, "reuse_race.cu", "LEAK:kept"))


def check_zero_copy(c, report, ctx):
    c.eq("device allocations", get(report, "totals", "kinds", "device", "allocs"), 0)
    c.eq("host live count", get(report, "totals", "host_live_count"), 3)
    c.eq("host live bytes", get(report, "totals", "host_current_bytes"), 12 * MiB)
    c.eq("kernel launches", get(report, "totals", "kernel_launches"), 1)


def check_copy_findings(c, report, ctx):
    messages = [f.get("message") for f in get(report, "transfers", "findings", default=[]) or []]
    to_pageable = (f"3 copies (6.0 MiB) to pageable memory at "
                   f"{at(ctx, 'copy_findings.cu', 'AT:to_pageable')}: pin it")
    c.true("d2h pageable finding", to_pageable in messages, "; ".join(messages))
    lone = f"1 copy (1.0 MiB) from pageable memory at {at(ctx, 'copy_findings.cu', 'AT:lone')}: pin it"
    c.true("one copy finding", lone in messages)
    line = at(ctx, "copy_findings.cu", "AT:template")
    small = [m for m in messages if m.startswith(("120 copies under 64 KiB at " + line,
                                                  "110 copies under 64 KiB at " + line))]
    c.eq("two template instances, two findings", len(set(small)), 2)


def check_arrays(c, report, ctx):
    arrays = get(report, "totals", "kinds", "array", default={})
    c.eq("array allocs", arrays.get("allocs"), 3)
    c.eq("array alloc_bytes", arrays.get("alloc_bytes"), 256 * KiB + 32 * KiB + 16 * KiB)
    c.eq("array live bytes", arrays.get("current_bytes"), 256 * KiB + 16 * KiB)
    c.eq("h2d copies", copies(report, "h2d"), 4)
    c.eq("d2h copies", copies(report, "d2h"), 3)
    c.eq("leak site", get(report, "leaks", "device", "sites", 0, "location"),
         at(ctx, "arrays.cu", "LEAK:array2d"))


def check_graphs(c, report, ctx):
    # Work happens at each launch: 3 launches of the captured graph, 1 of the
    # built one (tests/e2e/fidelity_test.cc, ExpectGraphs).
    c.eq("h2d copies", copies(report, "h2d"), 4)
    c.eq("d2h copies", copies(report, "d2h"), 3)
    sites = {s.get("location"): s for s in get(report, "transfers", "sites", default=[]) or []}
    c.eq("captured copy site count", get(sites, at(ctx, "graphs.cu", "AT:captured_in"), "count"), 3)
    graph = get(report, "totals", "kinds", "graph", default={})
    c.eq("graph allocs", graph.get("allocs"), 4)
    c.eq("graph frees", graph.get("frees"), 3)
    c.eq("graph live bytes", graph.get("current_bytes"), 4 * MiB)
    c.eq("leak site", get(report, "leaks", "device", "sites", 0, "location"),
         at(ctx, "graphs.cu", "LEAK:graph"))
    c.eq("transfers.unmatched_records", get(report, "transfers", "unmatched_records"), 0)


def check_graph_reuse(c, report, ctx):
    # Graph memory as the driver hands it out (tests/e2e/fidelity_test.cc,
    # Fidelity.GraphAllocationsSharingAnAddressInOneLaunch). The questions:
    # does the driver give the 1 MiB allocation the freed 3 MiB's address
    # (GWSIM_GRAPH_ADDRESS_REUSE), and does it keep freed graph memory until
    # cudaDeviceGraphMemTrim (oom.graph_pool_idle_bytes)? Whatever the answers,
    # gpuwatch's counts must hold.
    shared = "addresses shared" in ctx["stdout"]
    c.true(f"driver answer: addresses {'shared' if shared else 'distinct'} "
           f"(GWSIM_GRAPH_ADDRESS_REUSE={1 if shared else 0} matches)", True)
    graph = get(report, "totals", "kinds", "graph", default={})
    c.eq("graph allocs", graph.get("allocs"), 4)
    c.eq("graph frees", graph.get("frees"), 3)
    c.eq("graph live bytes", graph.get("current_bytes"), 1 * MiB)
    c.eq("device peak", get(report, "totals", "device_peak_bytes"), 3 * MiB)
    c.eq("leak site", get(report, "leaks", "device", "sites", 0, "location"),
         at(ctx, "graph_reuse.cu", "LEAK:second"))
    oom = load(ctx["report_path"] + ".oom-1")
    idle = get(oom, "oom", "graph_pool_idle_bytes")
    c.true(f"driver answer: graph memory idle in the pool at the OOM: {idle} bytes "
           f"(the simulator: {2 * MiB if shared else 3 * MiB})", oom is not None)


def check_default_copies(c, report, ctx):
    c.eq("no unknown direction", get(report, "totals", "copies", "unknown"), None)
    c.eq("h2d copies", copies(report, "h2d"), 2)
    c.eq("d2h copies", copies(report, "d2h"), 1)
    c.eq("peer copies", copies(report, "peer"), 1)


def check_vmm_striped(c, report, ctx):
    devices = get(report, "trace", "devices", default=[]) or []
    c.eq("devices", [(d.get("device"), d.get("peak_bytes")) for d in devices],
         [(0, 2 * MiB), (1, 2 * MiB)])


def check_vmm_handles(c, report, ctx):
    # VMM per physical handle (tests/e2e/fidelity_test.cc,
    # Fidelity.VmmMemoryIsCountedPerHandleAsTheDriverCountsIt).
    totals = get(report, "totals", default={})
    c.eq("device_peak_bytes", get(totals, "device_peak_bytes"), 12 * MiB)
    c.eq("vmm current_bytes", get(totals, "kinds", "vmm", "current_bytes"), 8 * MiB)
    c.eq("vmm allocs", get(totals, "kinds", "vmm", "allocs"), 5)
    c.eq("vmm_imported current_bytes", get(totals, "kinds", "vmm_imported", "current_bytes"),
         2 * MiB)
    leaks = get(report, "leaks", "device", default={})
    c.eq("leak sites", sorted((s.get("location"), s.get("bytes")) for s in leaks.get("sites", [])),
         sorted([(at(ctx, "vmm_handles.cc", "LEAK:vmm_unreleased"), 2 * MiB),
                 (at(ctx, "vmm_handles.cc", "LEAK:vmm_unmapped"), 6 * MiB)]))


def check_ipc_pair(c, report, ctx):
    # CUDA IPC (tests/e2e/ipc_test.cc). Both processes write to the same
    # report path; the parent exits last, so the report is the parent's. The
    # question for the driver: does CUPTI give the child MEMORY2 records of
    # memory it opened through IPC? The simulator does both: none by default,
    # an allocation and a release with GWSIM_IPC_MEMORY_RECORDS=1.
    records = re.search(r"ipc_pair child: (\d+) memory records", ctx["stdout"])
    c.true(f"driver answer: {records.group(1) if records else '?'} MEMORY2 records of the "
           "opened memory in the child (the simulator: 0; 2 with GWSIM_IPC_MEMORY_RECORDS=1)",
           records is not None)
    c.true("the child checked the parent's bytes and closed",
           "ipc_pair child: done" in ctx["stdout"] and "ipc_pair: done" in ctx["stdout"])
    device = get(report, "totals", "kinds", "device", default={})
    c.eq("parent device allocs", device.get("allocs"), 1)
    c.eq("parent device alloc_bytes", device.get("alloc_bytes"), 3 * MiB)
    c.eq("parent device frees", device.get("frees"), 1)
    c.eq("parent leaks", get(report, "leaks", "device", "bytes"), 0)


def check_nvtx_pool(c, report, ctx):
    # NVTX's memory extension (tests/e2e/regions_test.cc, ExpectRegions): with
    # the real driver's addresses, the regions still registered lie in the
    # pool's segment. NVTX finds gpuwatch through the preload constructor's
    # NVTX_INJECTION64_PATH; under CUDA_INJECTION64_PATH alone it does not.
    regions = get(report, "regions")
    if ctx["attach"] != "preload" and regions is None:
        return
    c.eq("regions.live_bytes", get(regions, "live_bytes"), 704 * KiB)
    c.eq("regions.outside_bytes", get(regions, "outside_bytes"), 64 * KiB)
    sites = get(regions, "sites", default=[]) or []
    c.eq("region callers", [s.get("caller") for s in sites],
         [at(ctx, "nvtx_pool.cu", "AT:" + m) for m in ("leaked", "shrunk", "torn_down")])
    c.eq("region segments", [get(s, "segment", "location") for s in sites],
         [at(ctx, "nvtx_pool.cu", "AT:segment")] * 2 + [None])
    c.eq("segment region bytes", get(regions, "segments", 0, "region_bytes"), 640 * KiB)
    c.eq("registered", get(regions, "counters", "registered"), 10)


CHECKS = {
    "nvtx_pool": check_nvtx_pool,
    "reuse_race": check_reuse_race,
    "zero_copy": check_zero_copy,
    "copy_findings": check_copy_findings,
    "arrays": check_arrays,
    "graphs": check_graphs,
    "graph_reuse": check_graph_reuse,
    "default_copies": check_default_copies,
    "vmm_striped": check_vmm_striped,
    "vmm_handles": check_vmm_handles,
    "ipc_pair": check_ipc_pair,
    "leaky_loop": check_leaky_loop,
    "api_mix": check_api_mix,
    "leak_sites": check_leak_sites,
    "threads": check_threads,
    "snapshot_signal": check_snapshot_signal,
    "transfers": check_transfers,
    "oom": check_oom,
    "pool_and_driver": check_pool_and_driver,
    "exit_with": check_exit_with,
}


def check(program, ctx):
    c = Checker()
    report = load(ctx["report_path"])
    if program == "oom" and report is None:
        report = load(ctx["report_path"] + ".oom-1")  # the exit report comes later
    if common(c, report, ctx):
        CHECKS[program](c, report, ctx)
    return c.results
