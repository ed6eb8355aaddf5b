#!/usr/bin/env python3
"""What one scrape of `gpuwatch exporter` costs, at many processes with many
sites each (issue 34: 100 processes x 10,000 sites).

Starts --processes copies of bench/programs/live_load (build/bench/live_load)
under gpuwatch in one live directory, each with --sites distinct call stacks
(one live 4 KiB allocation per site by default: --per-site 1), then idle on
stdin; and one `gpuwatch exporter --dir D --listen 127.0.0.1:0 --top T`. Then:

  idle      --seconds with nobody reading: each process's gpuwatch-bg thread
            CPU (/proc/PID/task/TID/schedstat, ns) while it only ticks
  cold      the first scrape (each process resolves its largest sites once)
  warm      --scrapes scrapes of /metrics back to back (the exporter's CPU
            over all of them, read once its threads sleep, less its idle rate)

and prints, per scrape (warm, median and max): its wall time, the bytes of
/metrics, the series (sample lines) in all and per process, the exporter's
CPU (utime + stime, over all the warm scrapes), the processes' CPU above their idle rate (all
of them together, and per process); the exporter's resident memory (VmRSS,
VmHWM) after the scrapes; and each live_load's VmRSS. It checks that every
process answered (gpuwatch_exporter_processes = --processes, no scrape
problem), that each process's device bytes are its load's, and that each has
exactly --top + 1 site series (its largest sites and site="other").

Without a GPU the load runs on the simulator (LD_LIBRARY_PATH=the build's
tests/sim/lib); with one (nvidia-smi works, or --gpu) on the real driver.

  cmake --build build --target bench_live_deps
  bench/scrape_cost.py --build build                        # 100 x 10,000
  bench/scrape_cost.py --build build --processes 10 --scrapes 5 --json out.json
"""

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

import bench_target
from bench_target import die, find_thread, schedstat_ns


def stat_cpu_ms(pid):
    """utime + stime of /proc/PID/stat (every thread, clock ticks), in ms."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1e3 / os.sysconf("SC_CLK_TCK")


def status_kib(pid, field):
    """A `field:  N kB` line of /proc/PID/status, in KiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


class Loads:
    """--processes copies of live_load under gpuwatch, one live directory."""

    def __init__(self, args):
        b = os.path.abspath(args.build)
        self.dir = tempfile.mkdtemp(prefix="gwscrape.")
        self.live = os.path.join(self.dir, "live")
        env = bench_target.load_env(args, self.live)
        # No checkpoint reports: they would land in the windows at random.
        env["GPUWATCH_CHECKPOINT_SECONDS"] = "0"
        outer = max(1, min(100, (args.sites + 99) // 100))
        inner = args.sites // outer
        if outer * inner != args.sites or inner > 100:
            die(f"--sites {args.sites}: give a multiple of 100 up to 10,000, or below 100")
        argv = [os.path.join(b, "bench", "live_load"), "--outer", str(outer), "--inner",
                str(inner), "--per-site", str(args.per_site), "--bytes", str(args.bytes)]
        self.procs = []
        t0 = time.monotonic()
        # In batches of a few: 100 processes starting at once on a small
        # machine only take longer each.
        for start in range(0, args.processes, args.batch):
            batch = [subprocess.Popen(argv, env=env, stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                     for _ in range(min(args.batch, args.processes - start))]
            for p in batch:
                self.procs.append(p)
                line = p.stdout.readline()
                if not line.startswith("live_load: ready"):
                    self.stop()
                    die(f"{' '.join(argv)} did not get ready: {line!r}")
                _, _, allocs, total = line.split()
                p.allocs, p.total_bytes = int(allocs), int(total)
                p.bg = find_thread(p.pid, "gpuwatch-bg")
                if p.bg is None:
                    self.stop()
                    die("no thread named gpuwatch-bg in the load")
        self.load_s = time.monotonic() - t0

    def bg_ns(self):
        return {p.pid: schedstat_ns(f"/proc/{p.pid}/task/{p.bg}/schedstat") for p in self.procs}

    def stop(self):
        for p in self.procs:
            try:
                p.stdin.close()
            except OSError:
                pass
        for p in self.procs:
            try:
                p.wait(timeout=120)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


class Exporter:
    def __init__(self, args, live):
        b = os.path.abspath(args.build)
        argv = [os.path.join(b, "bin", "gpuwatch"), "exporter", "--dir", live, "--listen",
                "127.0.0.1:0", "--top", str(args.top), "--timeout-ms", str(args.timeout_ms)]
        self.p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  text=True)
        line = self.p.stderr.readline()
        m = re.search(r"http://[^:]+:(\d+)", line)
        if not m:
            self.p.kill()
            die(f"the exporter did not start: {line!r}")
        self.url = f"http://127.0.0.1:{m.group(1)}/metrics"
        self.pid = self.p.pid

    def scrape(self):
        """(the body, wall seconds)."""
        t0 = time.perf_counter()
        with urllib.request.urlopen(self.url, timeout=600) as r:
            body = r.read()
        return body, time.perf_counter() - t0

    def stop(self):
        self.p.terminate()
        try:
            self.p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()


SAMPLE = re.compile(r'^(\w+)(?:\{(.*)\})? (\S+)$')
PID = re.compile(r'(?:^|,)pid="(\d+)"')


def series(body):
    """{family: [(labels text, value)]} of the sample lines of `body`."""
    out = {}
    for line in body.decode().split("\n"):
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        if m:
            out.setdefault(m.group(1), []).append((m.group(2) or "", float(m.group(3))))
    return out


def check(body, loads, top):
    """Problems with a scrape, and the series per pid."""
    fam = series(body)
    problems = []
    per_pid = {}
    for name, rows in fam.items():
        if not name.startswith("gpuwatch_"):
            continue
        for labels, _ in rows:
            m = PID.search(labels)
            if m:
                per_pid[int(m.group(1))] = per_pid.get(int(m.group(1)), 0) + 1
    answered = fam.get("gpuwatch_exporter_processes", [("", -1)])[0][1]
    if answered != len(loads.procs):
        problems.append(f"gpuwatch_exporter_processes {answered:g}, not {len(loads.procs)}")
    bad = fam.get("gpuwatch_exporter_scrape_problems", [("", -1)])[0][1]
    if bad != 0:
        problems.append(f"gpuwatch_exporter_scrape_problems {bad:g}")
    held = {int(PID.search(l).group(1)): v
            for l, v in fam.get("gpuwatch_process_device_memory_bytes", [])}
    sites = {}
    for l, _ in fam.get("gpuwatch_site_live_bytes", []):
        pid = int(PID.search(l).group(1))
        sites[pid] = sites.get(pid, 0) + 1
    for p in loads.procs:
        if held.get(p.pid) != p.total_bytes:
            problems.append(f"pid {p.pid}: holds {held.get(p.pid)}, not {p.total_bytes}")
        if sites.get(p.pid) != top + 1:
            problems.append(f"pid {p.pid}: {sites.get(p.pid)} site series, not {top + 1}")
    return problems, per_pid


def main():
    ap = bench_target.parser(__doc__)
    bench_target.add_load_options(ap, per_site=1)
    ap.add_argument("--processes", type=int, default=100, help="processes (default 100)")
    ap.add_argument("--sites", type=int, default=10000, help="sites per process (default 10000)")
    ap.add_argument("--top", type=int, default=20, help="the exporter's --top (default 20)")
    ap.add_argument("--scrapes", type=int, default=10, help="warm scrapes (default 10)")
    ap.add_argument("--seconds", type=float, default=10, help="the idle window (default 10)")
    ap.add_argument("--batch", type=int, default=4, help="processes started at once (default 4)")
    ap.add_argument("--timeout-ms", type=int, default=60000,
                    help="the exporter's --timeout-ms (default 60000: a busy machine's answers "
                         "are measured, not cut)")
    ap.add_argument("--json", help="also write every figure here")
    args = ap.parse_args()

    b = os.path.abspath(args.build)
    bench_target.check_built(args, [os.path.join(b, "bench", "live_load"),
                                    os.path.join(b, "lib", "libgpuwatch.so"),
                                    os.path.join(b, "bin", "gpuwatch")], "bench_live_deps")
    out = {"target": "gpu" if args.gpu else "simulator", "nproc": os.cpu_count(),
           "processes": args.processes, "sites": args.sites, "per_site": args.per_site,
           "top": args.top, "load_before": open("/proc/loadavg").read().split()[:3]}
    loads = Loads(args)
    exporter = None
    try:
        out["start_s"] = loads.load_s
        out["load_rss_kib"] = statistics.median(status_kib(p.pid, "VmRSS") for p in loads.procs)
        print(f"# {out['target']}: {args.processes} x live_load ({args.sites:,} sites, "
              f"{loads.procs[0].allocs:,} live allocations each), started in "
              f"{loads.load_s:.1f} s; each {out['load_rss_kib'] / 1024:.0f} MiB resident "
              f"(median)", file=sys.stderr)
        exporter = Exporter(args, loads.live)
        out["exporter_rss_kib_start"] = status_kib(exporter.pid, "VmRSS")

        # Idle: what the processes' threads and the exporter cost with nobody
        # reading.
        bg0, ex0 = loads.bg_ns(), stat_cpu_ms(exporter.pid)
        t0 = time.monotonic()
        time.sleep(args.seconds)
        idle_s = time.monotonic() - t0
        bg1, ex1 = loads.bg_ns(), stat_cpu_ms(exporter.pid)
        idle_rate = {pid: (bg1[pid] - bg0[pid]) / idle_s for pid in bg0}  # ns per s
        exporter_idle_rate = (ex1 - ex0) / idle_s  # ms per s

        def one(label):
            before = loads.bg_ns()
            t = time.monotonic()
            body, wall = exporter.scrape()
            dt = time.monotonic() - t
            after = loads.bg_ns()
            above = {pid: after[pid] - before[pid] - idle_rate[pid] * dt for pid in before}
            problems, per_pid = check(body, loads, args.top)
            for p in problems[:5]:
                print(f"scrape_cost.py: {label}: CHECK FAILED: {p}", file=sys.stderr)
            return {"wall_s": wall, "bytes": len(body),
                    "processes_cpu_ms": sum(above.values()) / 1e6,
                    "process_cpu_ms_median": statistics.median(above.values()) / 1e6,
                    "process_cpu_ms_max": max(above.values()) / 1e6,
                    "samples": sum(len(v) for v in series(body).values()),
                    "series_per_process": sorted(set(per_pid.values())),
                    "problems": problems}

        def exporter_cpu(scrapes):
            """Runs scrapes(); the exporter's CPU ms above idle meanwhile, from
            utime + stime of the whole process: each scrape runs on a thread
            of its own that has ended by then, whose schedstat is gone with
            it (clock ticks: read over several scrapes)."""
            ms0, t = stat_cpu_ms(exporter.pid), time.monotonic()
            result = scrapes()
            time.sleep(0.5)
            dt = time.monotonic() - t
            return result, stat_cpu_ms(exporter.pid) - ms0 - exporter_idle_rate * dt

        out["cold"], cold_ms = exporter_cpu(lambda: one("cold"))
        out["warm"], warm_ms = exporter_cpu(
            lambda: [one(f"warm {i + 1}") for i in range(args.scrapes)])
        out["exporter_cpu_ms"] = {"cold": cold_ms, "warm_per_scrape": warm_ms / args.scrapes,
                                  "idle_ms_per_s": exporter_idle_rate}
        out["exporter_rss_kib"] = status_kib(exporter.pid, "VmRSS")
        out["exporter_hwm_kib"] = status_kib(exporter.pid, "VmHWM")
        with open(f"/proc/{exporter.pid}/stat") as f:  # a cross-check of the schedstat sums
            fields = f.read().rsplit(")", 1)[1].split()
        out["exporter_total_cpu_ms"] = ((int(fields[11]) + int(fields[12])) * 1e3 /
                                        os.sysconf("SC_CLK_TCK"))
        out["idle_bg_ms_per_s_median"] = statistics.median(idle_rate.values()) / 1e6
    finally:
        if exporter is not None:
            exporter.stop()
        loads.stop()
    out["load_after"] = open("/proc/loadavg").read().split()[:3]

    med = statistics.median
    warm = out["warm"]

    def row(name, key, fmt):
        vals = [w[key] for w in warm]
        print(f"| {name} | {fmt(out['cold'][key])} | {fmt(med(vals))} | {fmt(max(vals))} |")

    print(f"\n{args.processes} processes x {args.sites:,} sites, --top {args.top}; "
          f"{args.scrapes} warm scrapes (load {out['load_before']} -> {out['load_after']})\n")
    print("| per scrape | cold (first) | warm, median | warm, max |")
    print("| --- | ---: | ---: | ---: |")
    row("wall time, ms", "wall_s", lambda v: f"{v * 1e3:.0f}")
    row("/metrics, bytes", "bytes", lambda v: f"{v:,}")
    row("series (sample lines)", "samples", lambda v: f"{v:,}")
    row("all processes' CPU above idle, ms", "processes_cpu_ms", lambda v: f"{v:.1f}")
    row("one process's CPU above idle, ms (median)", "process_cpu_ms_median",
        lambda v: f"{v:.2f}")
    row("one process's CPU above idle, ms (max)", "process_cpu_ms_max", lambda v: f"{v:.2f}")
    e = out["exporter_cpu_ms"]
    print(f"| exporter CPU above idle, ms (utime + stime) | {e['cold']:.0f} | "
          f"{e['warm_per_scrape']:.1f} (mean of {args.scrapes}) | |")
    print(f"\n- series per process: {warm[-1]['series_per_process']}")
    print(f"- exporter resident: {out['exporter_rss_kib_start'] / 1024:.1f} MiB at start, "
          f"{out['exporter_rss_kib'] / 1024:.1f} MiB after the scrapes "
          f"(high water {out['exporter_hwm_kib'] / 1024:.1f} MiB); its CPU from start to "
          f"end (utime + stime): {out['exporter_total_cpu_ms']:.0f} ms")
    print(f"- each process idle: {out['idle_bg_ms_per_s_median']:.3f} ms/s of gpuwatch-bg "
          f"(median); resident {out['load_rss_kib'] / 1024:.0f} MiB")
    failed = [p for w in [out["cold"]] + warm for p in w["problems"]]
    print(f"- checks: {'all passed' if not failed else f'{len(failed)} FAILED'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
