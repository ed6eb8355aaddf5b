#!/usr/bin/env python3
"""What gpuwatch costs a process whatever it does: start-up, the exit report,
and the memory it keeps per live allocation, with the defaults (checkpoints
on, event trace on).

  tiny     bench/programs/tiny_process (one cudaMalloc, two cudaMemcpy, one
           cudaFree), start to exit, with no tool and under gpuwatch
           (LD_PRELOAD): wall time in --rounds interleaved rounds, each round
           one run of each, and the median of the per-round ratios and
           differences; and the instructions of each whole process under
           callgrind (exact; --callgrind-out keeps the profiles for
           `callgrind_annotate --inclusive=yes`).
  exit     bench/programs/live_load --per-site 100 --leak (1,000,000 live
           allocations over 10,000 sites at exit): the time from closing its
           stdin to its exit, with no tool and under gpuwatch, medians of
           --exit-rounds interleaved rounds. Under gpuwatch that is the exit
           report (and its teardown).
  memory   the same load, resident memory (VmRSS) once it is ready, once the
           first checkpoint is written, and again after --idle seconds
           (checkpoints are written meanwhile), minus the same without a
           tool, per live allocation; and at the end, that split into
           anonymous memory and mapped files (RssAnon, RssFile). Medians of
           --memory-rounds rounds: the size moves by MiBs from run to run.
  checkpoint
           live_load --per-site 1 --free (10,000 sites, nothing live),
           GPUWATCH_CHECKPOINT_SECONDS=1: the CPU time of gpuwatch's thread
           (its schedstat, in ns) spent on each checkpoint: the first one
           after the allocations, then --touches more, each after one more
           allocation and free at one site (one site changed); with
           --changed N, at N sites of the 10,000 (100 or 10000), or after a
           kernel launch alone (0: the count changed, no site did).

With --teardown the exit part runs the simulator with
GWSIM_EXIT_CONTEXT_DESTROY=1: its runtime then destroys its context at exit,
as a runtime may, and gpuwatch times that teardown into the exit report
(NVIDIA's, driver 580, destroys none that gpuwatch hears of). The simulator's
own teardown of 1,000,000 allocations then takes seconds, in both runs.

Without a GPU the programs run on the simulator (LD_LIBRARY_PATH=the build's
tests/sim/lib); with one (nvidia-smi works, or --gpu) on the real driver.

  ninja -C build bench_fixed_cost_deps
  bench/fixed_cost.py --build build                  # all four
  bench/fixed_cost.py --build build --only tiny --rounds 9
  bench/fixed_cost.py --build build --json out.json  # also write every figure
  bench/fixed_cost.py --build build --before OLD/libgpuwatch.so  # before/after, same run

Every part runs --before's library too, interleaved with the others, when
given: a change's before and after measured on the same machine at the same
time.
"""

import json
import os
import re
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
        self.tiny = os.path.join(b, "bench", "tiny_process")
        self.load = os.path.join(b, "bench", "live_load")
        self.lib = (os.path.abspath(args.lib) if args.lib
                    else os.path.join(b, "lib", "libgpuwatch.so"))
        self.sim = os.path.join(b, "tests", "sim", "lib")
        self.gpu = bench_target.check_built(args, (self.tiny, self.load, self.lib),
                                            "bench_fixed_cost_deps")
        self.tmp = tempfile.mkdtemp(prefix="gwfixed.")

    def output(self):
        return os.path.join(self.tmp, "gw.json")

    def env(self, tool, teardown=False):
        env = bench_target.base_env(self.gpu, self.sim)
        if tool:
            env["LD_PRELOAD"] = self.before if tool == "before" else self.lib
            env["GPUWATCH_OUTPUT"] = os.path.join(self.tmp, "gw.%p.json")
        if teardown and not self.gpu:
            env["GWSIM_EXIT_CONTEXT_DESTROY"] = "1"
        return env

    def clean(self):
        for f in os.listdir(self.tmp):
            path = os.path.join(self.tmp, f)
            if os.path.isfile(path):
                os.unlink(path)


NAMES = {False: "no tool", True: "gpuwatch", "before": "gpuwatch (--before)"}


def run_tiny(setup, tool):
    t0 = time.monotonic()
    p = subprocess.run([setup.tiny], env=setup.env(tool), capture_output=True, text=True)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        die(f"tiny_process under {NAMES[tool]} exited {p.returncode}: {p.stderr}")
    setup.clean()
    return wall


def callgrind_total(setup, tool, keep):
    out = keep or os.path.join(setup.tmp, "cg.out")
    total = bench_target.callgrind([setup.tiny], setup.env(tool), out)
    if not keep:
        os.unlink(out)
    setup.clean()
    return total


def tiny(setup, args):
    walls = {tool: [] for tool in setup.tools}
    for _ in range(args.rounds):
        for tool in setup.tools:  # interleaved: drift hits each alike
            walls[tool].append(run_tiny(setup, tool))
    keep = args.callgrind_out
    print(f"# tiny process (one cudaMalloc, two cudaMemcpy, one cudaFree), start to exit; "
          f"{'GPU' if setup.gpu else 'simulator'}; medians of {args.rounds} interleaved rounds; "
          "added and ratio: medians of the rounds' own")
    print()
    print("| | wall ms | added ms | ratio | instructions (callgrind) | added |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    out = {"rounds": args.rounds}
    base_ir = 0
    for tool in setup.tools:
        ir = callgrind_total(setup, tool, keep and f"{keep}.{NAMES[tool].split()[0]}"
                             + ("-before" if tool == "before" else ""))
        base_ir = base_ir or ir
        ratios = [g / b for b, g in zip(walls[False], walls[tool])]
        added = [g - b for b, g in zip(walls[False], walls[tool])]
        row = {"wall_ms": 1e3 * statistics.median(walls[tool]),
               "added_ms": 1e3 * statistics.median(added), "ratio": statistics.median(ratios),
               "ir": ir, "ir_added": ir - base_ir}
        out[NAMES[tool]] = row
        print(f"| {NAMES[tool]} | {row['wall_ms']:.1f} | {row['added_ms']:.1f} | "
              f"{row['ratio']:.2f} | {ir:,} | {ir - base_ir:,} |")
    return out


class Load:
    """live_load running, ready: --per-site x 10,000 live allocations."""

    def __init__(self, setup, tool, leak, teardown=False, extra=(), env=None):
        argv = ([setup.load, "--per-site", str(setup.per_site)] + (["--leak"] if leak else [])
                + list(extra))
        self.p = subprocess.Popen(argv, env=env or setup.env(tool, teardown),
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        line = self.p.stdout.readline()
        if not line.startswith("live_load: ready"):
            self.p.kill()
            die(f"live_load did not get ready: {line!r} {self.p.stderr.read()[-2000:]}")
        self.live = int(line.split()[2])

    def rss(self, field="VmRSS"):
        """Bytes of /proc/PID/status's `field` (VmRSS, RssAnon, RssFile)."""
        with open(f"/proc/{self.p.pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
        return 0

    def cpu_s(self):
        """CPU seconds the process has spent so far (user and system)."""
        with open(f"/proc/{self.p.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def finish(self):
        """Closes stdin; the seconds until the process has exited, and the
        CPU seconds it spent meanwhile (less sensitive to a busy machine)."""
        cpu0 = self.cpu_s()
        t0 = time.monotonic()
        self.p.stdin.close()
        _, status, usage = os.wait4(self.p.pid, 0)
        wall = time.monotonic() - t0
        self.p.returncode = os.waitstatus_to_exitcode(status)
        err = self.p.stderr.read()
        if self.p.returncode != 0:
            die(f"live_load exited {self.p.returncode}: {err[-2000:]}")
        return wall, usage.ru_utime + usage.ru_stime - cpu0


def bg_cpu_ns(pid):
    """CPU ns of the process's thread named gpuwatch-bg (0: none)."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                if f.read().strip() != "gpuwatch-bg":
                    continue
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                return int(f.read().split()[0])
        except OSError:
            continue
    return 0


def wait_checkpoint(path, after, timeout=120):
    """Waits for a checkpoint written after `after` (an inode number, 0:
    none yet): the report is replaced by a rename, so a new one is a new
    inode. Returns its inode."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            ino = os.stat(path).st_ino
            if ino != after:
                return ino
        except FileNotFoundError:
            pass
        time.sleep(0.05)
    die(f"no checkpoint written to {path} within {timeout} s")


# live_load's stdin command that changes that many sites (0: a launch alone).
CHANGED_TOUCH = {0: "k", 1: "t", 100: "h", 10000: "a"}


def checkpoint(setup, args):
    """CPU of gpuwatch's thread per checkpoint, 10,000 sites, nothing live."""
    out = {}
    saved = setup.per_site
    setup.per_site = 1
    touch = CHANGED_TOUCH[args.changed]
    what = ("a kernel launch (no site changed)" if args.changed == 0 else
            f"{args.changed:,} site{'s' if args.changed > 1 else ''} changed")
    print("# one checkpoint, 10,000 sites, nothing live (live_load --per-site 1 --free), "
          "GPUWATCH_CHECKPOINT_SECONDS=1: CPU ms of gpuwatch's thread (schedstat) per "
          f"checkpoint; the first, then each after {what} (median of {args.touches})")
    print()
    print(f"| | first checkpoint ms | after {what} ms | report bytes |")
    print("| --- | ---: | ---: | ---: |")
    for tool in setup.tools[1:]:
        env = setup.env(tool)
        env["GPUWATCH_OUTPUT"] = setup.output()
        env["GPUWATCH_CHECKPOINT_SECONDS"] = "1"
        load = Load(setup, tool, leak=False, extra=["--free"], env=env)
        cpu0 = bg_cpu_ns(load.p.pid)
        ino = wait_checkpoint(setup.output(), 0)
        time.sleep(0.3)  # the thread's round ends after the rename
        first = bg_cpu_ns(load.p.pid) - cpu0
        touched = []
        for _ in range(args.touches):
            load.p.stdin.write(touch + "\n")
            load.p.stdin.flush()
            if load.p.stdout.readline().strip() != "live_load: touched":
                die("live_load did not answer a touch")
            c = bg_cpu_ns(load.p.pid)
            ino = wait_checkpoint(setup.output(), ino)
            time.sleep(0.3)
            touched.append(bg_cpu_ns(load.p.pid) - c)
        size = os.stat(setup.output()).st_size
        load.finish()
        setup.clean()
        # The first touch makes a new site; the rest change it.
        row = {"first_ms": first / 1e6, "touched_ms": [t / 1e6 for t in touched],
               "touched_median_ms": statistics.median(touched[1:] or touched) / 1e6,
               "report_bytes": size}
        out[NAMES[tool]] = row
        print(f"| {NAMES[tool]} | {row['first_ms']:.1f} | {row['touched_median_ms']:.1f} | "
              f"{size:,} |")
    setup.per_site = saved
    return out


def exit_report(setup, args):
    if args.exit_rounds == 0:  # the instruction counts alone
        return {"callgrind": exit_callgrind(setup, args)}
    walls = {tool: [] for tool in setup.tools}
    cpus = {tool: [] for tool in setup.tools}
    for _ in range(args.exit_rounds):
        for tool in setup.tools:
            load = Load(setup, tool, leak=True, teardown=args.teardown)
            wall, cpu = load.finish()
            walls[tool].append(wall)
            cpus[tool].append(cpu)
            setup.clean()
    how = (", GWSIM_EXIT_CONTEXT_DESTROY=1: the runtime destroys its context at exit and "
           "gpuwatch times that teardown" if args.teardown else "")
    print(f"# exit with {setup.per_site * 10000:,} live allocations over 10,000 sites{how}: "
          f"stdin closed to exit, median of {args.exit_rounds} interleaved rounds")
    print()
    print("| | wall s | added s | CPU s | added CPU s |")
    print("| --- | ---: | ---: | ---: | ---: |")
    out = {"rounds": args.exit_rounds, "teardown": args.teardown}
    for tool in setup.tools:
        added = statistics.median(g - b for b, g in zip(walls[False], walls[tool]))
        added_cpu = statistics.median(g - b for b, g in zip(cpus[False], cpus[tool]))
        row = {"s": statistics.median(walls[tool]), "added_s": added,
               "cpu_s": statistics.median(cpus[tool]), "added_cpu_s": added_cpu}
        out[NAMES[tool]] = row
        print(f"| {NAMES[tool]} | {row['s']:.3f} | {added:.3f} | {row['cpu_s']:.3f} | "
              f"{added_cpu:.3f} |")
    if args.exit_callgrind:
        print()
        out["callgrind"] = exit_callgrind(setup, args)
    return out


def exit_callgrind(setup, args):
    """Instructions in gpuwatch's exit handlers (the exit report; the
    teardown's), inclusive, under callgrind: exact, whatever the load."""
    annotate = shutil.which("callgrind_annotate")
    if not annotate:
        die("--exit-callgrind needs callgrind_annotate")
    per_site = args.exit_callgrind
    handlers = {"exit report": "OnProcessExit", "teardown": "OnTeardownDone"}
    print(f"# instructions in gpuwatch's exit handlers, {per_site * 10000:,} live allocations "
          f"over 10,000 sites (callgrind){', teardown timed' if args.teardown else ''}")
    print()
    print("| | " + " | ".join(handlers) + " |")
    print("| --- |" + " ---: |" * len(handlers))
    out = {"live": per_site * 10000}
    for tool in setup.tools[1:]:
        cg = os.path.join(setup.tmp, "exit.cg")
        bench_target.callgrind([setup.load, "--per-site", str(per_site), "--leak"],
                               setup.env(tool, teardown=args.teardown), cg,
                               ["--collect-atstart=no"]
                               + [f"--toggle-collect=*{h}*" for h in handlers.values()])
        text = subprocess.run([annotate, "--inclusive=yes", "--threshold=100", cg],
                              capture_output=True, text=True).stdout
        row = {}
        for name, fn in handlers.items():
            row[name] = 0
            for line in text.splitlines():
                m = re.match(r"\s*([\d,]+)\s.*" + fn + r"\(", line)
                if m:
                    row[name] = int(m.group(1).replace(",", ""))
                    break
        out[NAMES[tool]] = row
        print(f"| {NAMES[tool]} | " + " | ".join(f"{row[n]:,}" for n in handlers) + " |")
        setup.clean()
    return out


def memory_round(setup, args):
    """One round: the loads side by side; their sizes in bytes at each moment."""
    loads = {}
    for tool in setup.tools:
        env = setup.env(tool)
        if tool:
            env["GPUWATCH_OUTPUT"] = os.path.join(setup.tmp, f"mem-{NAMES[tool][:8]}.json")
        loads[tool] = Load(setup, tool, leak=False, env=env)
    sizes = {tool: {"ready": load.rss()} for tool, load in loads.items()}
    for tool in setup.tools[1:]:  # the first checkpoint is written (checkpoints are on)
        wait_checkpoint(os.path.join(setup.tmp, f"mem-{NAMES[tool][:8]}.json"), 0)
        time.sleep(0.5)
        sizes[tool]["checkpoint"] = loads[tool].rss()
    sizes[False]["checkpoint"] = loads[False].rss()
    time.sleep(args.idle)  # the process idles: what stays resident after its checkpoints
    for tool, load in loads.items():
        sizes[tool]["idle"] = load.rss()
        # Anonymous memory (gpuwatch's tables, rings, malloc arenas) apart from
        # mapped files (its libraries and debug files), at the same moment.
        sizes[tool]["anon"] = load.rss("RssAnon")
        sizes[tool]["files"] = load.rss("RssFile")
    live = loads[False].live
    for load in loads.values():
        load.finish()  # the exit: not timed here
    setup.clean()
    return live, sizes


def memory(setup, args):
    # A process's resident size moves by a few MiB from one run to the next
    # (where malloc's arenas end up): each figure is the median of the
    # rounds' own differences from the run without a tool.
    rounds = [memory_round(setup, args) for _ in range(args.memory_rounds)]
    live = rounds[0][0]

    def added(tool, moment):
        return statistics.median((sizes[tool][moment] - sizes[False][moment]) / live
                                 for _, sizes in rounds)

    def size(tool, moment):
        return statistics.median(sizes[tool][moment] for _, sizes in rounds)

    print(f"# resident memory (VmRSS) with {live:,} live allocations over 10,000 sites, "
          f"defaults; added bytes per live allocation (medians of {args.memory_rounds} "
          "round(s))")
    print()
    print(f"| | ready MiB | added B per allocation | after the first checkpoint MiB | added B "
          f"| after {args.idle:g} s idle MiB | added B |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    out = {"live": live, "rounds": args.memory_rounds}
    for tool in setup.tools:
        out[NAMES[tool]] = {"rss_ready": size(tool, "ready"),
                            "rss_checkpoint": size(tool, "checkpoint"),
                            "rss_idle": size(tool, "idle"),
                            "per_live_ready": added(tool, "ready"),
                            "per_live_checkpoint": added(tool, "checkpoint"),
                            "per_live_idle": added(tool, "idle"),
                            "per_live_idle_anon": added(tool, "anon"),
                            "per_live_idle_files": added(tool, "files")}
        o = out[NAMES[tool]]
        print(f"| {NAMES[tool]} | {o['rss_ready'] / 2**20:.1f} | {o['per_live_ready']:.0f} | "
              f"{o['rss_checkpoint'] / 2**20:.1f} | {o['per_live_checkpoint']:.0f} | "
              f"{o['rss_idle'] / 2**20:.1f} | {o['per_live_idle']:.0f} |")
    print()
    print(f"after {args.idle:g} s idle, added B per allocation: " + "; ".join(
        f"{NAMES[tool]} {out[NAMES[tool]]['per_live_idle_anon']:.1f} anonymous, "
        f"{out[NAMES[tool]]['per_live_idle_files']:.1f} mapped files" for tool in setup.tools[1:]))
    return out


def main():
    ap = bench_target.parser(__doc__)
    ap.add_argument("--only", choices=["tiny", "exit", "memory", "checkpoint"],
                    help="run one part only")
    ap.add_argument("--touches", type=int, default=5,
                    help="checkpoint: checkpoints after one site changed (default 5)")
    ap.add_argument("--changed", type=int, default=1, choices=sorted(CHANGED_TOUCH),
                    help="checkpoint: sites changed before each checkpoint (0: a kernel "
                         "launch alone; default 1)")
    ap.add_argument("--rounds", type=int, default=9, help="tiny: interleaved rounds (default 9)")
    ap.add_argument("--exit-rounds", type=int, default=3, help="exit: rounds (default 3; 0: --exit-callgrind alone)")
    ap.add_argument("--teardown", action="store_true",
                    help="exit: the simulator's runtime destroys its context at exit "
                         "(GWSIM_EXIT_CONTEXT_DESTROY=1), so gpuwatch times the teardown")
    ap.add_argument("--exit-callgrind", type=int, default=0, metavar="PER_SITE",
                    help="exit: also count the instructions of gpuwatch's exit handlers under "
                         "callgrind, PER_SITE x 10,000 live allocations (10: about 2 minutes)")
    ap.add_argument("--per-site", type=int, default=100,
                    help="exit, memory: live allocations per site, 10,000 sites (default 100)")
    ap.add_argument("--idle", type=float, default=20, help="memory: seconds idle (default 20)")
    ap.add_argument("--memory-rounds", type=int, default=3,
                    help="memory: rounds, each the loads side by side; medians (default 3)")
    ap.add_argument("--callgrind-out", help="tiny: keep the profiles as FILE.base, FILE.gpuwatch")
    ap.add_argument("--lib", help="the libgpuwatch.so to measure (default: the build's)")
    ap.add_argument("--before", help="another libgpuwatch.so, measured beside this build's")
    ap.add_argument("--json", help="write every figure to this file")
    args = ap.parse_args()
    setup = Setup(args)
    setup.per_site = args.per_site
    setup.before = args.before and os.path.abspath(args.before)
    setup.tools = [False, True] + (["before"] if args.before else [])
    result = {"machine": {"nproc": os.cpu_count(),
                          "load": open("/proc/loadavg").read().split()[:3]}}
    try:
        for part, fn in (("tiny", tiny), ("exit", exit_report), ("memory", memory),
                         ("checkpoint", checkpoint)):
            if args.only in (None, part):
                result[part] = fn(setup, args)
                print()
    finally:
        shutil.rmtree(setup.tmp, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
