#!/usr/bin/env python3
"""What the live view (gpuwatch top, gpuwatch exporter) costs the watched process.

Runs bench/programs/live_load (build/bench/live_load: 100,000 live device
allocations of 4 KiB over 10,000 call stacks, then idle) under gpuwatch, and
measures the CPU time of gpuwatch's background thread (`gpuwatch-bg`, the one
that answers readers and keeps the live view's one-second history) from
/proc/PID/task/TID/schedstat (ns on a CPU), over windows of --seconds:

  idle      nobody reads: the thread wakes each second for the history
            sample (and the timeline sample, GPUWATCH_SAMPLE_MS=1000)
  top       `gpuwatch top --once --dir D` run once a second
  direct    one connection a second asking "top 50\\n" (what top asks of
            each process), timed from connect to the last byte
and, in other processes with the same load, nobody reading:

  off       GPUWATCH_LIVE=0: the thread's cost without the live view (the
            timeline sample each second), to subtract from `idle`
  tick      the live view on, GPUWATCH_SAMPLE_MS=0 and no checkpoints: the
            live view's one-second history sample alone
  none      GPUWATCH_LIVE=0, GPUWATCH_SAMPLE_MS=0, no checkpoints: no timer

Before the windows each process waits for its last checkpoint report, the
one that holds all the load (about 0.2 s of CPU with 100,000 live
allocations; none after it, as nothing changes), so that no window holds it.

and prints, for each, the thread's CPU ms per second and % of one core, the
whole process's (every thread), the answer's size and the time one read takes
as seen by the reader. It checks that the state is the load's: device live
bytes = allocations x bytes, sites listed + other_sites.count = the load's
sites.

Without a GPU the load runs on the simulator (LD_LIBRARY_PATH=the build's
tests/sim/lib); with one (nvidia-smi works, or --gpu) on the real driver.

  ninja -C build bench_live_deps
  bench/live_poll.py --build build                      # 30 s windows
  bench/live_poll.py --build build --seconds 10 --repeat 3 --json out.json
"""

import json
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import bench_target
from bench_target import die, find_thread, schedstat_ns


def thread_ns(pid, tid):
    return schedstat_ns(f"/proc/{pid}/task/{tid}/schedstat")


def process_ns(pid):
    """Every live thread's ns on a CPU, summed (threads that ended are not
    counted: the load's threads live as long as it)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            total += thread_ns(pid, tid)
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total


def read_state(sock_path, top=50, timeout=5.0):
    """One reader's connection: returns (bytes of the answer, seconds from
    connect to the last byte)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    t0 = time.perf_counter()
    s.connect(sock_path)
    s.sendall(f"top {top}\n".encode())
    chunks = []
    while True:
        c = s.recv(1 << 16)
        if not c:
            break
        chunks.append(c)
    t = time.perf_counter() - t0
    s.close()
    return b"".join(chunks), t


class Load:
    """live_load under gpuwatch, waiting on its stdin."""

    def __init__(self, args, live=True, env_extra=None):
        b = os.path.abspath(args.build)
        self.dir = tempfile.mkdtemp(prefix="gwlive.")
        env = bench_target.load_env(args, self.dir)
        if not live:
            env["GPUWATCH_LIVE"] = "0"
        env.update(env_extra or {})
        self.checkpoint_seconds = int(env.get("GPUWATCH_CHECKPOINT_SECONDS", "5"))
        self.checkpoints = self.checkpoint_seconds != 0
        argv = [os.path.join(b, "bench", "live_load"), "--per-site", str(args.per_site),
                "--bytes", str(args.bytes)]
        t0 = time.monotonic()
        self.p = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        line = self.p.stdout.readline()
        if not line.startswith("live_load: ready"):
            self.p.kill()
            die(f"{' '.join(argv)} did not get ready: {line!r} {self.p.stderr.read()[-2000:]}")
        self.load_s = time.monotonic() - t0
        _, _, allocs, total = line.split()
        self.allocs, self.total_bytes = int(allocs), int(total)
        self.pid = self.p.pid
        self.sock = os.path.join(self.dir, f"{self.pid}.sock")
        self.bg = find_thread(self.pid, "gpuwatch-bg")
        if self.bg is None:
            self.stop()
            die("no thread named gpuwatch-bg in the load")

    def settle(self, timeout=90):
        """Waits for the last checkpoint report: gpuwatch writes one when the
        peak has risen or, GPUWATCH_CHECKPOINT_SECONDS after the last one, when
        events came since, each at least 20 times its own cost after the
        previous one; so the last comes seconds after the load, and none
        after it, as nothing changes. Waits until the report holds every
        allocation. Returns the thread's CPU ms meanwhile (mostly the
        reports) and whether the report came."""
        bg0 = thread_ns(self.pid, self.bg)
        t0 = time.monotonic()
        settled = not self.checkpoints
        while not settled and time.monotonic() - t0 < timeout:
            for f in os.listdir(self.dir):
                if not (f.startswith("report.") and f.endswith(".json")):
                    continue
                try:
                    with open(os.path.join(self.dir, f)) as fp:
                        report = json.load(fp)
                    if report["totals"]["device_live_count"] == self.allocs:
                        settled = True
                except (OSError, ValueError, KeyError, TypeError):
                    pass
            time.sleep(0.5)
        time.sleep(0.5 if self.checkpoints else 2.0)
        return (thread_ns(self.pid, self.bg) - bg0) / 1e6, settled

    def stop(self):
        self.p.stdin.close()
        try:
            self.p.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        err = self.p.stderr.read()
        shutil.rmtree(self.dir, ignore_errors=True)
        if self.p.returncode != 0:
            die(f"live_load exited {self.p.returncode}: {err[-2000:]}")


def window(load, seconds, poll=None):
    """CPU of the thread and of the process over `seconds`, calling poll()
    once a second (at 0.5 s, 1.5 s, ...) when given; returns a dict."""
    reads = []
    bg0, proc0 = thread_ns(load.pid, load.bg), process_ns(load.pid)
    children0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    k = 0
    while True:
        due = t0 + k + 0.5
        if due >= t0 + seconds:
            break
        now = time.monotonic()
        if due > now:
            time.sleep(due - now)
        if poll is not None:
            reads.append(poll())
        k += 1
    end = t0 + seconds
    now = time.monotonic()
    if end > now:
        time.sleep(end - now)
    wall = time.monotonic() - t0
    bg1, proc1 = thread_ns(load.pid, load.bg), process_ns(load.pid)
    children1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    reader_cpu = ((children1.ru_utime - children0.ru_utime) +
                  (children1.ru_stime - children0.ru_stime))
    return {"seconds": wall, "reads": len(reads),
            "bg_ms_per_s": (bg1 - bg0) / 1e6 / wall,
            "process_ms_per_s": (proc1 - proc0) / 1e6 / wall,
            "read_s": reads,
            "reader_cpu_ms_per_read": reader_cpu * 1e3 / len(reads) if reads else None}


def check_state(load, expect_sites, top):
    raw, t = read_state(load.sock, top)
    if not raw.endswith(b"\n"):
        die(f"the answer is cut short ({len(raw)} bytes)")
    state = json.loads(raw)
    problems = []
    live = state["device"]["live_bytes"]
    if live != load.total_bytes:
        problems.append(f"device live bytes {live:,} != {load.total_bytes:,}")
    if state["device"]["live_count"] != load.allocs:
        problems.append(f"device live count {state['device']['live_count']:,} != {load.allocs:,}")
    sites = len(state["sites"]) + state["other_sites"]["count"]
    if sites != expect_sites:
        problems.append(f"sites listed + other_sites.count = {sites:,}, not {expect_sites:,}")
    if len(state["sites"]) != min(top, expect_sites):
        problems.append(f"{len(state['sites'])} sites listed, asked for {top}")
    return state, len(raw), t, sites, problems


def fmt_ms(x):
    return f"{x:.3f}"


def main():
    ap = bench_target.parser(__doc__)
    ap.add_argument("--seconds", type=float, default=30, help="each window (default 30)")
    ap.add_argument("--repeat", type=int, default=1, help="windows of each kind (default 1)")
    bench_target.add_load_options(ap, per_site=10)
    ap.add_argument("--top", type=int, default=50, help="sites the direct reader asks for")
    ap.add_argument("--no-off", action="store_true", help="skip the GPUWATCH_LIVE=0 process")
    ap.add_argument("--no-direct", action="store_true", help="skip the direct-socket window")
    ap.add_argument("--json", help="also write every figure here")
    args = ap.parse_args()

    b = os.path.abspath(args.build)
    cli = os.path.join(b, "bin", "gpuwatch")
    for path in (os.path.join(b, "bench", "live_load"), os.path.join(b, "lib", "libgpuwatch.so"),
                 cli):
        if not os.path.exists(path):
            die(f"{path} is missing: build it with `ninja -C {args.build} bench_live_deps`")
    if not bench_target.resolve_gpu(args) and not os.path.isdir(os.path.join(b, "tests", "sim", "lib")):
        die("no GPU and no simulator in the build")
    sites_expected = 100 * 100

    out = {"target": "gpu" if args.gpu else "simulator", "seconds": args.seconds,
           "repeat": args.repeat, "nproc": os.cpu_count(),
           "load_before": open("/proc/loadavg").read().split()[:3], "windows": {}}
    load = Load(args)
    try:
        out["checkpoint_ms"], out["checkpoint_written"] = load.settle()
        state, size, first_s, sites, problems = check_state(load, sites_expected, args.top)
        for p in problems:
            print(f"live_poll.py: CHECK FAILED: {p}", file=sys.stderr)
        out.update({"pid": load.pid, "allocations": load.allocs, "live_bytes": load.total_bytes,
                    "load_s": load.load_s, "sites": sites, "answer_bytes": size,
                    "first_read_s": first_s, "checks_failed": problems})
        print(f"# {out['target']}; live_load: {load.allocs:,} live allocations, "
              f"{load.total_bytes:,} bytes, {sites:,} sites (state: "
              f"{len(state['sites'])} listed + other_sites.count "
              f"{state['other_sites']['count']:,}); loaded in {load.load_s:.1f} s")
        print(f"# checks: {'all passed' if not problems else '; '.join(problems)}")
        print(f"# answer to 'top {args.top}': {size:,} bytes; the first read "
              f"(sites symbolized): {first_s * 1e3:.1f} ms")
        print(f"# before the windows: waited for the last checkpoint report "
              f"({'settled' if out['checkpoint_written'] else 'NOT SETTLED'}): "
              f"{out['checkpoint_ms']:.0f} ms of the thread's CPU meanwhile (reports and ticks)")

        def top_poll():
            t0 = time.perf_counter()
            p = subprocess.run([cli, "top", "--once", "--dir", load.dir], capture_output=True,
                               text=True)
            t = time.perf_counter() - t0
            if p.returncode != 0 or str(load.pid) not in p.stdout:
                die(f"gpuwatch top --once failed ({p.returncode}): {p.stdout[-500:]}"
                    f"{p.stderr[-500:]}")
            return t

        def direct_poll():
            raw, t = read_state(load.sock, args.top)
            if len(raw) < 100:
                die(f"a short answer: {raw!r}")
            return t

        kinds = [("idle", None), ("top", top_poll)]
        if not args.no_direct:
            kinds.append(("direct", direct_poll))
        for r in range(args.repeat):
            for name, poll in kinds:  # interleaved
                w = window(load, args.seconds, poll)
                out["windows"].setdefault(name, []).append(w)
                print(f"  [{r + 1}/{args.repeat}] {name}: bg {w['bg_ms_per_s']:.3f} ms/s, "
                      f"process {w['process_ms_per_s']:.3f} ms/s, {w['reads']} reads",
                      file=sys.stderr)
        _, _, _, _, problems = check_state(load, sites_expected, args.top)
        out["checks_failed"] += [f"after: {p}" for p in problems]
    finally:
        load.stop()

    # Other processes, nobody reading: what the thread costs without the live
    # view, with the live view's one-second tick alone, and with no timer.
    quiet = {"GPUWATCH_SAMPLE_MS": "0", "GPUWATCH_CHECKPOINT_SECONDS": "0"}
    others = [] if args.no_off else [("off", False, {}), ("tick", True, quiet),
                                     ("none", False, quiet)]
    for name, live, extra in others:
        other = Load(args, live=live, env_extra=extra)
        try:
            if os.path.exists(other.sock) != live:
                die(f"{name}: GPUWATCH_LIVE={int(live)} and the socket "
                    f"{'missing' if live else 'there'}")
            _, settled = other.settle()
            if not settled:
                print(f"live_poll.py: {name}: no checkpoint with the whole load within 90 s",
                      file=sys.stderr)
            for r in range(args.repeat):
                w = window(other, args.seconds)
                out["windows"].setdefault(name, []).append(w)
                print(f"  [{r + 1}/{args.repeat}] {name}: bg {w['bg_ms_per_s']:.3f} ms/s, "
                      f"process {w['process_ms_per_s']:.3f} ms/s", file=sys.stderr)
        finally:
            other.stop()

    med = statistics.median
    print()
    print(f"Windows of {args.seconds:g} s, {args.repeat} of each (median; CPU from schedstat)")
    print()
    print("| window | gpuwatch-bg CPU ms/s | % of a core | whole process ms/s | reads | "
          "one read, reader's wall ms (median / max) | reader process CPU ms per read |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    labels = {"none": "GPUWATCH_LIVE=0, no timeline samples, no checkpoints (no timer)",
              "tick": "the live view's tick alone (GPUWATCH_SAMPLE_MS=0, no checkpoints)",
              "off": "GPUWATCH_LIVE=0 (defaults: timeline sample each second)",
              "idle": "defaults, live view on, nobody reads",
              "top": "`gpuwatch top --once` every second",
              "direct": f"one socket read (`top {args.top}`) every second"}
    summary = {}
    for name in ("none", "tick", "off", "idle", "top", "direct"):
        ws = out["windows"].get(name)
        if not ws:
            continue
        bg = med(w["bg_ms_per_s"] for w in ws)
        proc = med(w["process_ms_per_s"] for w in ws)
        reads = [t for w in ws for t in w["read_s"]]
        rd = (f"{med(reads) * 1e3:.2f} / {max(reads) * 1e3:.2f}" if reads else "-")
        rc = [w["reader_cpu_ms_per_read"] for w in ws if w["reader_cpu_ms_per_read"] is not None]
        rcs = f"{med(rc):.2f}" if rc and name == "top" else "-"
        summary[name] = {"bg_ms_per_s": bg, "bg_core_pct": bg / 10, "process_ms_per_s": proc,
                         "read_ms_median": med(reads) * 1e3 if reads else None,
                         "read_ms_max": max(reads) * 1e3 if reads else None}
        print(f"| {labels[name]} | {fmt_ms(bg)} | {bg / 10:.3f}% | {fmt_ms(proc)} | "
              f"{sum(w['reads'] for w in ws)} | {rd} | {rcs} |")
    out["summary"] = summary
    print()
    if "idle" in summary:
        for name in ("top", "direct"):
            if name in summary:
                per = summary[name]["bg_ms_per_s"] - summary["idle"]["bg_ms_per_s"]
                print(f"- per read ({name}): {per:.3f} ms of the thread's CPU above idle")
                summary[name]["bg_ms_per_read_above_idle"] = per
        if "off" in summary:
            d = summary["idle"]["bg_ms_per_s"] - summary["off"]["bg_ms_per_s"]
            print(f"- the live view idle (history sample), idle minus off: {d:.3f} ms/s "
                  f"({d / 10:.4f}% of a core)")
            summary["idle_minus_off_ms_per_s"] = d
        if "tick" in summary and "none" in summary:
            d = summary["tick"]["bg_ms_per_s"] - summary["none"]["bg_ms_per_s"]
            print(f"- the live view's tick alone, tick minus none: {d:.3f} ms/s "
                  f"({d / 10:.4f}% of a core)")
            summary["tick_minus_none_ms_per_s"] = d
    worst = max(summary[n]["bg_ms_per_s"] for n in ("top", "direct") if n in summary)
    print(f"- target: at most 1% of a core (10 ms/s) polled every second: "
          f"{'met' if worst <= 10 else 'MISSED'} ({worst / 10:.3f}% at most)")
    out["load_after"] = open("/proc/loadavg").read().split()[:3]
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    if out["checks_failed"]:
        print("CHECKS FAILED: " + "; ".join(out["checks_failed"]))
        sys.exit(1)


if __name__ == "__main__":
    main()
