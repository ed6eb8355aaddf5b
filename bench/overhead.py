#!/usr/bin/env python3
"""What gpuwatch and heaptrack add per tracked event, end to end, in one run.

Runs bench/programs/overhead_workload (build/bench/overhead_workload) several
ways, interleaved, --repeat times each, and compares medians:

  base      the workload alone
  null      under a CUPTI client that enables gpuwatch's callbacks and does
            nothing (bench/null_subscriber.cc): the cost of being a CUPTI
            subscriber at all, on the simulator the simulator's dispatch
  gpuwatch  LD_PRELOAD=libgpuwatch.so, defaults (32-frame stacks)
  nostack   the same with GPUWATCH_DEPTH=0
  depth16   GPUWATCH_DEPTH=16: half the frames (each capture also unwinds
            the tool frames above the user's call: 7 on the simulator)
  heaptrack heaptrack 1.4 (an LD_PRELOAD malloc tracker with libunwind stacks)

gpuwatch tracks CUDA allocations, heaptrack tracks malloc. The workload does
both from the same call depth and the same call sites: N cudaMalloc/cudaFree
pairs (cuda_alloc) and N malloc/free pairs (host_alloc). Each tool's cost per
tracked event is (its run - base) / events on the phase it tracks: gpuwatch on
cuda_alloc, heaptrack on host_alloc; 2 events per pair. Both capture a stack
on allocation only. Copies and launches are reported for gpuwatch alone.

Without a GPU the workload runs on the simulator (LD_LIBRARY_PATH=the build's
tests/sim/lib); with one (nvidia-smi works, or --gpu) on the real driver.

  bench/overhead.py --build build                    # the comparison table
  bench/overhead.py --build build --scaling          # per-op cost from 1e3 to 1e7 events
  bench/overhead.py --build build --callgrind        # instructions per op (noise-free)
  bench/overhead.py --build build --json out.json    # also write every figure
  bench/overhead.py --build build --only nvtx        # NVTX push+pop: ns and instructions
  bench/overhead.py --build build --only nvtx --before OLD/libgpuwatch.so  # and a before
"""

import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import tempfile
import time

import bench_target
from bench_target import die


class Setup:
    def __init__(self, args):
        b = os.path.abspath(args.build)
        self.workload = os.path.join(b, "bench", "overhead_workload")
        self.null = os.path.join(b, "bench", "libgwbench_null_subscriber.so")
        self.lib = os.path.join(b, "lib", "libgpuwatch.so")
        self.sim = os.path.join(b, "tests", "sim", "lib")
        for path in (self.workload, self.null, self.lib):
            if not os.path.exists(path):
                die(f"{path} is missing: build it with `ninja -C {args.build} bench_overhead_deps`")
        self.gpu = bench_target.resolve_gpu(args)
        if not self.gpu and not os.path.isdir(self.sim):
            die(f"no GPU and no simulator at {self.sim}")
        self.heaptrack = None if args.no_heaptrack else shutil.which("heaptrack")
        self.tmp = tempfile.mkdtemp(prefix="gwbench.")
        self.extra_ld_path = args.extra_ld_path
        self.unwind = args.unwind
        self.before = args.before and os.path.abspath(args.before)

    def env(self, config):
        env = bench_target.base_env(self.gpu, self.sim, [self.extra_ld_path])
        env["GPUWATCH_OUTPUT"] = os.path.join(self.tmp, "gw.%p.json")
        env["GPUWATCH_SUMMARY"] = "0"
        if self.unwind:
            env["GPUWATCH_UNWIND"] = self.unwind
        if config == "null":
            env["CUDA_INJECTION64_PATH"] = self.null
        elif config.startswith("null-"):  # null-none, null-runtime, null-driver
            env["CUDA_INJECTION64_PATH"] = self.null
            env["GWBENCH_NULL_LAUNCH"] = config[len("null-"):]
        elif config == "gpuwatch":
            env["LD_PRELOAD"] = self.lib
        elif config in ("before", "before-notrace"):
            env["LD_PRELOAD"] = self.before
        elif config == "notrace":
            env["LD_PRELOAD"] = self.lib
        elif config == "nostack":
            env["LD_PRELOAD"] = self.lib
            env["GPUWATCH_DEPTH"] = "0"
        elif config == "depth16":
            env["LD_PRELOAD"] = self.lib
            env["GPUWATCH_DEPTH"] = "16"
        if config.endswith("notrace"):
            env["GPUWATCH_TRACE_EVENTS"] = "0"
        return env


def run_workload(setup, config, workload_args, wrapper=None):
    """Runs the workload once; returns ({phase: result}, wall s, cpu s of the tree)."""
    argv = [setup.workload] + workload_args
    if config == "heaptrack":
        argv = [setup.heaptrack, "-o", os.path.join(setup.tmp, "ht")] + argv
    if wrapper:
        argv = wrapper + argv
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = subprocess.run(argv, env=setup.env(config), capture_output=True, text=True)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if p.returncode != 0:
        die(f"{config}: {' '.join(argv)} exited {p.returncode}:\n{p.stderr[-2000:]}")
    phases = {}
    for line in p.stdout.splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            phases[r["phase"]] = r
    for f in os.listdir(setup.tmp):  # reports and heaptrack files: not kept
        os.unlink(os.path.join(setup.tmp, f))
    return phases, wall, cpu, p.stderr


def median_runs(runs, phase, key):
    return statistics.median(r[0][phase][key] for r in runs)


def collect(setup, configs, workload_args, repeat):
    runs = {c: [] for c in configs}
    for _ in range(repeat):
        for c in configs:  # interleaved, so that drift hits every config alike
            runs[c].append(run_workload(setup, c, workload_args))
    return runs


CLOCK = "cpu"  # set from --clock


def per_op(runs, config, phase):
    """Median ns per op of the phase's first and second halves, by CLOCK."""
    cpu = "cpu_" if CLOCK == "cpu" else ""
    first = median_runs(runs[config], phase, f"first_{cpu}per_op_ns")
    second = median_runs(runs[config], phase, f"second_{cpu}per_op_ns")
    return first, second


def fmt(x):
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:,.1f}"


def comparison(setup, args):
    configs = ["base", "null", "gpuwatch", "depth16", "nostack"]
    if setup.heaptrack:
        configs.append("heaptrack")
    phases = "cuda_alloc,host_alloc,copy,launch"
    wl = ["--events", str(args.events), "--depth", str(args.depth), "--sites", str(args.sites),
          "--phases", phases]
    runs = collect(setup, configs, wl, args.repeat)
    out = {"events": args.events, "depth": args.depth, "sites": args.sites,
           "repeat": args.repeat, "target": "gpu" if setup.gpu else "simulator", "figures": {}}
    fig = out["figures"]

    clock = ("the calling thread's CPU time" if CLOCK == "cpu" else "wall clock")
    print(f"# {'GPU' if setup.gpu else 'simulator'}; {args.events:,} ops per phase, "
          f"call depth {args.depth}, {args.sites} site(s), median of {args.repeat} runs; "
          f"ns per op ({clock})")
    print()
    print("| phase | base | null CUPTI client | gpuwatch | gpuwatch, 16 frames | gpuwatch, no stack"
          + (" | heaptrack |" if setup.heaptrack else " |"))
    print("| --- | ---: | ---: | ---: | ---: | ---:" + (" | ---: |" if setup.heaptrack else " |"))
    rows = [("cuda_alloc", 0, "cudaMalloc"), ("cuda_alloc", 1, "cudaFree"),
            ("host_alloc", 0, "malloc"), ("host_alloc", 1, "free"),
            ("copy", 0, "cudaMemcpy H2D 64 B"), ("launch", 0, "kernel launch")]
    for phase, half, label in rows:
        cells = []
        for c in configs:
            v = per_op(runs, c, phase)[half]
            fig.setdefault(c, {})[label] = v
            cells.append(fmt(v))
        print(f"| {label} | " + " | ".join(cells) + " |")
    print()

    def added(config, phase, half, minus="base"):
        return per_op(runs, config, phase)[half] - per_op(runs, minus, phase)[half]

    def added_event(config, phase, minus="base"):
        # Two tracked events per pair: the allocation and the free.
        return (added(config, phase, 0, minus) + added(config, phase, 1, minus)) / 2

    lines = [
        ("gpuwatch: added per cudaMalloc (32-frame stack)", added("gpuwatch", "cuda_alloc", 0)),
        ("gpuwatch: added per cudaMalloc, of which gpuwatch's own (minus null client)",
         added("gpuwatch", "cuda_alloc", 0, "null")),
        ("gpuwatch: added per cudaMalloc, 16-frame stack (GPUWATCH_DEPTH=16)",
         added("depth16", "cuda_alloc", 0)),
        ("gpuwatch: added per cudaMalloc without a stack", added("nostack", "cuda_alloc", 0)),
        ("gpuwatch: added per cudaFree", added("gpuwatch", "cuda_alloc", 1)),
        ("gpuwatch: added per cudaFree, own", added("gpuwatch", "cuda_alloc", 1, "null")),
        ("gpuwatch: added per copy (32-frame stack)", added("gpuwatch", "copy", 0)),
        ("gpuwatch: added per copy, own", added("gpuwatch", "copy", 0, "null")),
        ("gpuwatch: added per copy without a stack", added("nostack", "copy", 0)),
        ("gpuwatch: added per kernel launch", added("gpuwatch", "launch", 0)),
        ("gpuwatch: added per kernel launch, own", added("gpuwatch", "launch", 0, "null")),
        ("null CUPTI client: added per cudaMalloc", added("null", "cuda_alloc", 0)),
        ("null CUPTI client: added per kernel launch", added("null", "launch", 0)),
        ("gpuwatch: added per tracked event (alloc+free)/2", added_event("gpuwatch", "cuda_alloc")),
        ("gpuwatch: added on malloc/free it does not track (per event)",
         added_event("gpuwatch", "host_alloc")),
    ]
    if setup.heaptrack:
        lines += [
            ("heaptrack: added per malloc (stack)", added("heaptrack", "host_alloc", 0)),
            ("heaptrack: added per free", added("heaptrack", "host_alloc", 1)),
            ("heaptrack: added per tracked event (malloc+free)/2",
             added_event("heaptrack", "host_alloc")),
            ("heaptrack: added per cudaMalloc/cudaFree event (it sees the simulator's own mallocs)"
             if not setup.gpu else "heaptrack: added per cudaMalloc/cudaFree event",
             added_event("heaptrack", "cuda_alloc")),
        ]
    print("| figure | ns |")
    print("| --- | ---: |")
    for label, v in lines:
        fig.setdefault("added", {})[label] = v
        print(f"| {label} | {fmt(v)} |")
    if setup.heaptrack:
        gw = added_event("gpuwatch", "cuda_alloc")
        ht = added_event("heaptrack", "host_alloc")
        ratio = gw / ht if ht > 0 else float("nan")
        fig["ratio_gpuwatch_to_heaptrack_per_event"] = ratio
        print(f"| ratio gpuwatch / heaptrack, per tracked event | {ratio:.2f} |")
    print()
    if setup.heaptrack:
        fig["cpu"] = cpu_comparison(setup, args)
    # Whole-run CPU time (every process of the run: heaptrack_interpret too).
    print("| run | wall s (median) | CPU s, all processes (median) |")
    print("| --- | ---: | ---: |")
    for c in configs:
        wall = statistics.median(r[1] for r in runs[c])
        cpu = statistics.median(r[2] for r in runs[c])
        fig.setdefault("runs", {})[c] = {"wall_s": wall, "cpu_s": cpu}
        print(f"| {c} | {wall:.2f} | {cpu:.2f} |")
    return out


def cpu_comparison(setup, args):
    """CPU time per tracked event over whole runs of the tracked phase alone:
    every process counts (heaptrack hands its events to heaptrack_interpret,
    which compresses them on the other core), and so do attach and the exit
    report. (tool run - base run) / (2 x events)."""
    n = args.events
    wl = ["--events", str(n), "--depth", str(args.depth), "--sites", str(args.sites)]
    runs = {}
    for _ in range(args.repeat):
        for config, phase in (("base", "cuda_alloc"), ("gpuwatch", "cuda_alloc"),
                              ("base", "host_alloc"), ("heaptrack", "host_alloc")):
            r = run_workload(setup, config, wl + ["--phases", phase])
            runs.setdefault((config, phase), []).append(r)
    cpu = {k: statistics.median(r[2] for r in v) for k, v in runs.items()}
    wall = {k: statistics.median(r[1] for r in v) for k, v in runs.items()}
    gw = (cpu[("gpuwatch", "cuda_alloc")] - cpu[("base", "cuda_alloc")]) / (2 * n) * 1e9
    ht = (cpu[("heaptrack", "host_alloc")] - cpu[("base", "host_alloc")]) / (2 * n) * 1e9
    gw_wall = (wall[("gpuwatch", "cuda_alloc")] - wall[("base", "cuda_alloc")]) / (2 * n) * 1e9
    ht_wall = (wall[("heaptrack", "host_alloc")] - wall[("base", "host_alloc")]) / (2 * n) * 1e9
    print()
    print(f"# whole runs of the tracked phase alone ({n:,} pairs, median of {args.repeat}): "
          "CPU time of every process and wall time, per tracked event")
    print()
    print("| tool | CPU ns per event | wall ns per event (process start to end) |")
    print("| --- | ---: | ---: |")
    print(f"| gpuwatch (cudaMalloc/cudaFree) | {fmt(gw)} | {fmt(gw_wall)} |")
    print(f"| heaptrack (malloc/free) | {fmt(ht)} | {fmt(ht_wall)} |")
    print(f"| ratio gpuwatch / heaptrack | {gw / ht:.2f} | {gw_wall / ht_wall:.2f} |")
    return {"gpuwatch_cpu_ns": gw, "heaptrack_cpu_ns": ht, "gpuwatch_wall_ns": gw_wall,
            "heaptrack_wall_ns": ht_wall}


def scaling(setup, args):
    """Added ns per op for 1e3 .. 1e7 operations per phase (one process each)."""
    out = {}
    sizes = [1000, 10000, 100000, 1000000] + ([10000000] if args.max_events >= 10000000 else [])
    print("# per-op cost against the number of events (ns of "
          f"{'thread CPU time' if CLOCK == 'cpu' else 'wall clock'}; median of "
          f"{args.scaling_repeat}; cudaMalloc/cudaFree pairs with 1,000 live; launches)")
    print()
    print("| events | base cudaMalloc | +gpuwatch | base cudaFree | +gpuwatch | base launch | +gpuwatch |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for n in sizes:
        wl = ["--events", str(n), "--depth", str(args.depth), "--sites", str(args.sites),
              "--phases", "cuda_alloc,launch"]
        runs = collect(setup, ["base", "gpuwatch"], wl, args.scaling_repeat)
        b_alloc, b_free = per_op(runs, "base", "cuda_alloc")
        g_alloc, g_free = per_op(runs, "gpuwatch", "cuda_alloc")
        b_launch = per_op(runs, "base", "launch")[0]
        g_launch = per_op(runs, "gpuwatch", "launch")[0]
        out[n] = {"alloc_base": b_alloc, "alloc_added": g_alloc - b_alloc, "free_base": b_free,
                  "free_added": g_free - b_free, "launch_base": b_launch,
                  "launch_added": g_launch - b_launch}
        print(f"| {n:,} | {fmt(b_alloc)} | {fmt(g_alloc - b_alloc)} | {fmt(b_free)} | "
              f"{fmt(g_free - b_free)} | {fmt(b_launch)} | {fmt(g_launch - b_launch)} |")
    return out


def callgrind_ir(setup, config, phase, n, depth, sites):
    """Instructions executed inside the phase's function, and inside gpuwatch's
    callback (inclusive), per op."""
    annotate = shutil.which("callgrind_annotate")
    if not annotate:
        die("--callgrind needs callgrind_annotate")
    fn = {"cuda_alloc": "gw_bench_alloc", "host_alloc": "gw_bench_alloc",
          "copy": "gw_bench_copy", "launch": "gw_bench_launch", "sync": "gw_bench_sync",
          "nvtx": "gw_bench_nvtx"}[phase]
    outfile = os.path.join(setup.tmp, "cg.out")
    wl = ["--events", str(n), "--depth", str(depth), "--sites", str(sites), "--phases", phase,
          "--warmup", "0"]
    total = bench_target.callgrind([setup.workload] + wl, setup.env(config), outfile,
                                   [f"--toggle-collect={fn}"])
    inside = {}
    a = subprocess.run([annotate, "--inclusive=yes", "--threshold=100", outfile],
                       capture_output=True, text=True).stdout
    for line in a.splitlines():
        m = re.match(r"\s*([\d,]+)\s.*?(\S+)\s*$", line)
        if not m:
            continue
        ir = int(m.group(1).replace(",", ""))
        for key, pat in (("gpuwatch_callback", "gpuwatch::OnCuptiCallback"),
                         ("gpuwatch_activity", "BufferCompleted"),
                         ("null_callback", "OnCallback")):
            if pat in line and key not in inside:
                inside[key] = ir
    for f in os.listdir(setup.tmp):
        os.unlink(os.path.join(setup.tmp, f))
    ops = 2 * n if phase.endswith("_alloc") else n
    return total / ops, {k: v / ops for k, v in inside.items()}


def callgrind(setup, args):
    out = {}
    n = args.callgrind_events
    print(f"# instructions per op under callgrind ({n:,} ops, the phase function only; "
          "alloc phase: per event, i.e. per cudaMalloc or cudaFree)")
    print()
    print("| phase | base | null client | gpuwatch | gpuwatch 16 frames | gpuwatch no stack | "
          "in gpuwatch's callback | in its activity handler |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for phase in ("cuda_alloc", "copy", "launch", "sync"):
        row = {}
        for config in ("base", "null", "gpuwatch", "depth16", "nostack"):
            row[config] = callgrind_ir(setup, config, phase, n, args.depth, args.sites)
        out[phase] = {c: {"ir_per_op": v[0], **{k: x for k, x in v[1].items()}}
                      for c, v in row.items()}
        cb = row["gpuwatch"][1].get("gpuwatch_callback", 0)
        act = row["gpuwatch"][1].get("gpuwatch_activity", 0)
        print(f"| {phase} | {row['base'][0]:,.0f} | {row['null'][0]:,.0f} | "
              f"{row['gpuwatch'][0]:,.0f} | {row['depth16'][0]:,.0f} | {row['nostack'][0]:,.0f} | "
              f"{cb:,.0f} | {act:,.0f} |")
    return out


def nvtx(setup, args):
    """NVTX's nvtxRangePushA + nvtxRangePop, the full path: the toolkit's nvtx3
    headers in the workload, gpuwatch injected by its preload constructor
    (NVTX_INJECTION64_PATH), a session attached (the workload's first
    cudaMalloc) with its defaults (event trace on) and with the trace off.
    Per pair: thread CPU ns (median of --repeat interleaved runs) and
    instructions (callgrind, exact); added = config - base, which is NVTX's
    no-op call through its table."""
    configs = ["base", "gpuwatch", "notrace"]
    if setup.before:
        configs += ["before", "before-notrace"]
    names = {"base": "no tool (NVTX's no-op)", "gpuwatch": "gpuwatch",
             "notrace": "gpuwatch, GPUWATCH_TRACE_EVENTS=0", "before": "--before",
             "before-notrace": "--before, GPUWATCH_TRACE_EVENTS=0"}
    wl = ["--events", str(args.events), "--depth", str(args.depth), "--sites", str(args.sites),
          "--phases", "nvtx"]
    runs = collect(setup, configs, wl, args.repeat)
    n = args.callgrind_events
    print(f"# NVTX push+pop; {'GPU' if setup.gpu else 'simulator'}; {args.events:,} pairs, "
          f"{args.sites} name(s), call depth {args.depth}, median of {args.repeat} interleaved "
          f"runs (thread CPU ns); instructions: callgrind, {n:,} pairs")
    print()
    print("| configuration | ns per pair | added per pair | added per call | instructions per pair "
          "| added per pair |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    out = {}
    base_ns = per_op(runs, "base", "nvtx")[0]
    base_ir = None
    for c in configs:
        ns = per_op(runs, c, "nvtx")[0]
        ir, _ = callgrind_ir(setup, c, "nvtx", n, args.depth, args.sites)
        if base_ir is None:
            base_ir = ir
        out[c] = {"ns": ns, "added_ns": ns - base_ns, "ir": ir, "added_ir": ir - base_ir,
                  "rounds_ns": [r[0]["nvtx"]["first_cpu_per_op_ns"] for r in runs[c]]}
        print(f"| {names[c]} | {fmt(ns)} | {fmt(ns - base_ns)} | {fmt((ns - base_ns) / 2)} | "
              f"{ir:,.0f} | {ir - base_ir:,.0f} |")
    return out


def main():
    ap = bench_target.parser(__doc__)
    ap.add_argument("--no-heaptrack", action="store_true")
    ap.add_argument("--events", type=int, default=200000, help="ops per phase (default 200000)")
    ap.add_argument("--depth", type=int, default=40, help="call depth under each op (default 40)")
    ap.add_argument("--sites", type=int, default=4, help="distinct call sites, <= 64 (default 4)")
    ap.add_argument("--repeat", type=int, default=5, help="runs per config (default 5)")
    ap.add_argument("--scaling", action="store_true", help="also: per-op cost from 1e3 to 1e7")
    ap.add_argument("--max-events", type=int, default=10000000)
    ap.add_argument("--scaling-repeat", type=int, default=3)
    ap.add_argument("--callgrind", action="store_true", help="also: instructions per op")
    ap.add_argument("--callgrind-events", type=int, default=20000)
    ap.add_argument("--before", help="--only nvtx: another libgpuwatch.so, measured beside "
                    "this build's in the same interleaved runs")
    ap.add_argument("--only", choices=["comparison", "scaling", "callgrind", "launches", "nvtx"],
                    help="run one part only")
    ap.add_argument("--extra-ld-path", help="prepended to LD_LIBRARY_PATH (carried libraries)")
    ap.add_argument("--unwind", choices=["cfi", "libunwind"],
                    help="GPUWATCH_UNWIND for the gpuwatch runs (default: gpuwatch's, cfi)")
    ap.add_argument("--json", help="write every figure to this file")
    ap.add_argument("--clock", choices=["cpu", "wall"], default="cpu",
                    help="per-op times from the thread's CPU time (default: robust on a busy "
                         "machine) or the wall clock")
    args = ap.parse_args()
    global CLOCK
    CLOCK = args.clock
    setup = Setup(args)
    result = {"machine": {"nproc": os.cpu_count(), "cpu": cpu_model(),
                          "load": open("/proc/loadavg").read().split()[:3]},
              "clock": args.clock}
    try:
        if args.only in (None, "comparison"):
            result["comparison"] = comparison(setup, args)
        if args.scaling or args.only == "scaling":
            print()
            result["scaling"] = scaling(setup, args)
        if args.only == "launches":
            result["launches"] = launch_matrix(setup, args)
        if args.only == "nvtx":
            result["nvtx"] = nvtx(setup, args)
        if args.callgrind or args.only == "callgrind":
            print()
            result["callgrind"] = callgrind(setup, args)
    finally:
        shutil.rmtree(setup.tmp, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


def launch_matrix(setup, args):
    """What CUPTI charges per kernel launch for each set of launch callbacks
    a client enables: none, the runtime's, the driver's, both (gpuwatch's
    set), against gpuwatch itself. On a driver that issues the driver's
    callback inside the runtime's, one domain sees every launch."""
    configs = ["base", "null-none", "null-runtime", "null-driver", "null", "gpuwatch", "nostack"]
    wl = ["--events", str(args.events), "--depth", str(args.depth), "--sites", str(args.sites),
          "--phases", "launch"]
    runs = collect(setup, configs, wl, args.repeat)
    names = {"base": "no CUPTI client", "null-none": "null client, no launch callbacks",
             "null-runtime": "null client, runtime launch callbacks",
             "null-driver": "null client, driver launch callbacks",
             "null": "null client, both (gpuwatch's set)", "gpuwatch": "gpuwatch",
             "nostack": "gpuwatch, no stacks"}
    base = per_op(runs, "base", "launch")[0]
    print(f"# launch cost by enabled callbacks; {'GPU' if setup.gpu else 'simulator'}; "
          f"{args.events:,} launches, median of {args.repeat} runs; ns per launch")
    print()
    print("| configuration | ns per launch | added |")
    print("| --- | ---: | ---: |")
    out = {}
    for c in configs:
        ns = per_op(runs, c, "launch")[0]
        out[c] = {"ns": ns, "added": ns - base}
        print(f"| {names[c]} | {fmt(ns)} | {fmt(ns - base)} |")
    return out


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


if __name__ == "__main__":
    main()
