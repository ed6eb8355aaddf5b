#!/usr/bin/env python3
"""The instructions of one checkpoint by what changed before it (issue 33:
a checkpoint's cost in proportion to what changed; docs/BENCHMARKS.md).

Runs bench/programs/live_load --per-site 1 --free (10,000 sites, nothing
live) under gpuwatch with GPUWATCH_CHECKPOINT_SECONDS=1, under callgrind
counting only inside gpuwatch::MaybeCheckpoint
(--toggle-collect=gpuwatch::MaybeCheckpoint*). After the first checkpoint
it changes --changed sites (live_load's stdin commands: 0 a kernel launch
alone, 1 one site, 100 the first outer function's sites, 10000 every site),
waits for the report's new inode (a checkpoint replaces it by a rename),
then asks for profiles (callgrind_control -d) every --settle seconds and
sums those that counted a checkpoint until one counts only looks (calls
that find no checkpoint due): one figure per checkpoint even when it
outlasts a wait, --touches times. (--dump-after=gpuwatch::MaybeCheckpoint*
is passed too, but valgrind 3.19 dumps nothing for it.) Exact:
instructions, not time.

The first touch of one site makes a new site; the later ones change it:
the median is of the touches after the first two (steady state), or of all
when there are fewer than three. A figure that holds two checkpoints (the
report was renamed again while it was summed: the second one due because
the first's snapshot fell between the touch's allocation and its free) is
marked "(2)" and left out of the median.

  ninja -C build bench_fixed_cost_deps
  bench/checkpoint_callgrind.py --build build --changed 0 1 100 10000
  bench/checkpoint_callgrind.py --build build --before OLD/libgpuwatch.so  # same run
  bench/checkpoint_callgrind.py --build build --keep /tmp/cg   # keep the profiles

With --before, each --changed value runs the before library, then this
one: both on the same machine at the same time. Keep the library's file
name libgpuwatch.so (gpuwatch knows its own module by it). Under callgrind
a checkpoint of 10,000 changed sites takes seconds; the driver waits for
its profile, not a fixed time.
"""

import glob
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_target  # noqa: E402
from bench_target import die, profile_total  # noqa: E402
from fixed_cost import CHANGED_TOUCH, wait_checkpoint  # noqa: E402

# A look that finds no checkpoint due counts thousands of instructions; a
# checkpoint of 10,000 sites tens of millions.
CHECKPOINT_MIN_IR = 1_000_000


def dumps(prefix):
    """The numbered profiles callgrind dumped so far: {number: path}."""
    out = {}
    for path in glob.glob(prefix + ".*"):
        suffix = path[len(prefix) + 1:]
        if suffix.isdigit():
            out[int(suffix)] = path
    return out


def wait_profile(prefix, seen, pid, settle, timeout=300):
    """The instructions of the checkpoint just written: profiles asked for
    (callgrind_control -d) every `settle` seconds, summed from the first that
    counted a checkpoint until one counts only looks (the call has ended; a
    checkpoint still running when a profile is taken ends in the next).
    `seen`, the profiles before, gets the new ones. (--dump-after dumps no
    profile here, valgrind 3.19: the driver asks.)"""
    deadline = time.monotonic() + timeout
    total = 0
    while time.monotonic() < deadline:
        time.sleep(settle)
        subprocess.run(["callgrind_control", "-d", str(pid)], capture_output=True,
                       timeout=timeout)
        new = {}
        while not new and time.monotonic() < deadline:
            new = {n: path for n, path in dumps(prefix).items() if n not in seen}
            time.sleep(0.1)
        for n, path in sorted(new.items()):
            ir = profile_total(path)
            while not ir and time.monotonic() < deadline:  # not written whole yet
                time.sleep(0.05)
                ir = profile_total(path)
            seen.add(n)
            if ir >= CHECKPOINT_MIN_IR:
                total += ir
            elif total:
                return total
    die(f"no checkpoint's profile under {prefix} within {timeout} s")


def run(args, lib, changed, tmp, label):
    """Instructions of the first checkpoint and of each after a touch."""
    out_dir = os.path.join(tmp, f"{label}-{changed}")
    os.makedirs(out_dir)
    report = os.path.join(out_dir, "gw.json")
    prefix = os.path.join(out_dir, "cg.out")
    env = bench_target.base_env(args.gpu, args.sim)
    env.update(LD_PRELOAD=lib, GPUWATCH_OUTPUT=report, GPUWATCH_CHECKPOINT_SECONDS="1")
    argv = [shutil.which("valgrind"), "--tool=callgrind", "-q",
            "--toggle-collect=gpuwatch::MaybeCheckpoint*",
            "--dump-after=gpuwatch::MaybeCheckpoint*", f"--callgrind-out-file={prefix}",
            args.load, "--per-site", "1", "--free"]
    p = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        if not line.startswith("live_load: ready"):
            die(f"live_load did not get ready: {line!r} {p.stderr.read()[-2000:]}")
        ino = wait_checkpoint(report, 0, timeout=300)
        seen = set()
        result = {"first": wait_profile(prefix, seen, p.pid, args.settle), "touched": [],
                  "report_bytes": 0}
        for _ in range(args.touches):
            p.stdin.write(CHANGED_TOUCH[changed] + "\n")
            p.stdin.flush()
            if p.stdout.readline().strip() != "live_load: touched":
                die("live_load did not answer a touch")
            ino = wait_checkpoint(report, ino, timeout=300)
            ir = wait_profile(prefix, seen, p.pid, args.settle)
            # Another rename meanwhile: a second checkpoint ran back to back
            # (the snapshot fell between the touch's allocation and its
            # free) and the sum holds both: marked, and left out of the
            # median.
            again = os.stat(report).st_ino != ino
            ino = os.stat(report).st_ino
            result["touched"].append((ir, again))
        result["report_bytes"] = os.stat(report).st_size
    finally:
        p.stdin.close()
        p.wait()
    if not args.keep:
        shutil.rmtree(out_dir)
    return result


def main():
    ap = bench_target.parser(__doc__)
    ap.add_argument("--lib", help="the gpuwatch library (default: BUILD/lib/libgpuwatch.so)")
    ap.add_argument("--before", help="another libgpuwatch.so, measured in the same run")
    ap.add_argument("--changed", type=int, nargs="+", default=[1], choices=sorted(CHANGED_TOUCH),
                    help="sites changed before each checkpoint (0: a kernel launch alone; "
                         "default 1)")
    ap.add_argument("--touches", type=int, default=4,
                    help="checkpoints after a change, each run (default 4)")
    ap.add_argument("--settle", type=float, default=2.5,
                    help="seconds from the report's rename to asking for a profile (default 2.5)")
    ap.add_argument("--keep", help="keep the profiles under this directory")
    args = ap.parse_args()
    b = os.path.abspath(args.build)
    args.load = os.path.join(b, "bench", "live_load")
    args.sim = os.path.join(b, "tests", "sim", "lib")
    lib = os.path.abspath(args.lib or os.path.join(b, "lib", "libgpuwatch.so"))
    args.gpu = bench_target.check_built(args, (args.load, lib), "bench_fixed_cost_deps")
    if not shutil.which("valgrind"):
        die("the instruction counts need valgrind")
    libs = [("before", os.path.abspath(args.before))] if args.before else []
    libs.append(("after", lib))
    tmp = args.keep or tempfile.mkdtemp(prefix="gwckptcg.")
    os.makedirs(tmp, exist_ok=True)
    print("# instructions in gpuwatch::MaybeCheckpoint per checkpoint, live_load --per-site 1 "
          f"--free (10,000 sites, nothing live), {'GPU' if args.gpu else 'simulator'}; "
          "steady: median of the touches after the first two")
    print()
    print("| sites changed | library | until the first checkpoint | each after a change | steady | "
          "report bytes |")
    print("| ---: | --- | ---: | --- | ---: | ---: |")
    for changed in args.changed:
        for label, path in libs:
            r = run(args, path, changed, tmp, label)
            t = r["touched"]
            one = [ir for ir, again in (t[2:] if len(t) > 2 else t) if not again]
            steady = statistics.median(one) if one else float("nan")
            each = " / ".join(f"{ir / 1e6:.1f} M{' (2)' if again else ''}" for ir, again in t)
            print(f"| {changed:,} | {label} | {r['first'] / 1e6:.1f} M | {each} | "
                  f"{steady / 1e6:.1f} M | {r['report_bytes']:,} |", flush=True)
    if not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        print(f"\nprofiles under {tmp}")


if __name__ == "__main__":
    main()
