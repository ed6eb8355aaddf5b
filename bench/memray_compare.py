#!/usr/bin/env python3
"""gpuwatch beside memray on one PyTorch script (docs/BENCHMARKS.md, docs/testing.md).

Runs bench/memray_workload.py (host tensors copied to the device and back,
every tenth step's pair kept) --rounds times in each of four ways,
interleaved so that a machine's drift hits all four alike:

  none      python memray_workload.py
  memray    python -m memray run -o RUN.bin memray_workload.py
  gpuwatch  gpuwatch run -o RUN.json -- python memray_workload.py
  both      gpuwatch run -o RUN.json -- python -m memray run -o RUN.bin memray_workload.py

and prints, per way, the median wall time, CPU time (user + system of the
whole process tree) and peak RSS (of the largest process in it), each from
wait4(); then what each tool found in its last run: memray's peak heap, its
allocations and the workload's lines holding the most host memory at the end;
gpuwatch's device peak, device memory live at exit by line, and copies.

The interpreter must have torch and memray (scripts/torch-env.sh's). Without
a GPU (no nvidia-smi) the workload runs on gpuwatch's CUDA simulator, whose
device memory is host memory: memray then sees it too, at the line that made
the device allocation.

With --pytest it runs bench/memray_pytest (two PyTorch tests, each with
pytest-memray's marker and gpuwatch's) three times instead, and prints what
pytest printed: `pytest --memray` (pytest-memray's gates), `gpuwatch run --
pytest -p no:memray --gpuwatch` (gpuwatch's), and both in one run.

  bench/memray_compare.py --python build/torch-env/bin/python [--build build] [--rounds 5]
  bench/memray_compare.py --python build/torch-env/bin/python --pytest
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOAD = os.path.join(HERE, "memray_workload.py")
WAYS = ("none", "memray", "gpuwatch", "both")


def argv_for(way, python, cli, tmp, steps):
    script = [WORKLOAD, str(steps)]
    memray = [python, "-m", "memray", "run", "-q", "-f", "-o", os.path.join(tmp, way + ".bin")]
    gpuwatch = [cli, "run", "--no-summary", "-o", os.path.join(tmp, way + ".json"), "--"]
    return {"none": [python] + script,
            "memray": memray + script,
            "gpuwatch": gpuwatch + [python] + script,
            "both": gpuwatch + memray + script}[way]


def run_once(argv, env):
    """(wall s, cpu s, peak RSS bytes, stdout) of one run; exits on failure."""
    out = tempfile.TemporaryFile()
    err = tempfile.TemporaryFile()
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, env=env, stdout=out, stderr=err)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    out.seek(0)
    err.seek(0)
    if proc.returncode != 0:
        sys.exit("memray_compare: %s exited %d:\n%s" % (" ".join(argv), proc.returncode,
                                                        err.read().decode()[-3000:]))
    # ru_maxrss is in KiB; wait4's usage covers the process and its reaped children.
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024, out.read().decode()


def memray_found(path, python):
    """What memray found in PATH: peak heap, allocations, and the workload's
    lines by host bytes still allocated when tracking ended."""
    code = r"""
import json, sys
from memray import FileReader
r = FileReader(sys.argv[1])
by = {}
for a in r.get_leaked_allocation_records(merge_threads=True):
    frames = a.stack_trace()
    if frames and frames[0][1].endswith("memray_workload.py"):
        line = "memray_workload.py:%d" % frames[0][2]
        by[line] = by.get(line, 0) + a.size
print(json.dumps({"peak": r.metadata.peak_memory, "allocations": r.metadata.total_allocations,
                  "left_by_line": sorted(by.items(), key=lambda kv: -kv[1])}))
"""
    return json.loads(subprocess.check_output([python, "-c", code, path]))


def gpuwatch_found(path):
    """What gpuwatch found in the report at PATH: device peak, device memory
    live at exit by line, and copies."""
    with open(path) as f:
        report = json.load(f)
    device = report["leaks"]["device"]
    copies = ["%s %s %d (%s)" % (t["direction"], t["host"], t["count"], mib(t["bytes"]))
              for t in report["transfers"]["totals"]]
    return {"peak": report["peak"]["device_bytes"], "live": device["bytes"],
            "live_by_line": [(s["location"], s["bytes"], s.get("category", ""))
                             for s in device["sites"]],
            "copies": copies,
            "findings": [f["message"] for f in report["transfers"]["findings"]]}


def side_by_side(python, cli, env, tmp):
    """pytest-memray's gates and gpuwatch's on bench/memray_pytest: alone,
    then together; prints each run's output and time."""
    suite = os.path.join(tmp, "memray_pytest")
    shutil.copytree(os.path.join(HERE, "memray_pytest"), suite)
    pytest = [python, "-m", "pytest", "-p", "no:cacheprovider", "-p", "gpuwatch.pytest_plugin",
              "-W", "ignore::pytest.PytestUnknownMarkWarning"]
    gpuwatch = [cli, "run", "--no-summary", "-o", os.path.join(tmp, "pytest.json"), "--"]
    env = dict(env, COLUMNS="120", PYTHONPATH=os.path.join(os.path.dirname(HERE), "python"))
    for title, argv in (("pytest-memray", pytest + ["--memray"]),
                        ("gpuwatch", gpuwatch + pytest + ["-p", "no:memray", "--gpuwatch"]),
                        ("both", gpuwatch + pytest + ["--memray", "--gpuwatch"])):
        t0 = time.monotonic()
        p = subprocess.run(argv, env=env, cwd=suite, capture_output=True, text=True)
        print("==== %s: exit %d, %.1f s\n$ %s\n%s%s" % (
            title, p.returncode, time.monotonic() - t0,
            " ".join(os.path.basename(a) if a in (python, cli) else a for a in argv),
            p.stdout, p.stderr))


def mib(n):
    return "%.1f MiB" % (n / (1 << 20))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--python", required=True, help="a python with torch and memray")
    parser.add_argument("--build", default="build")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--keep", help="a folder for the last round's files")
    parser.add_argument("--pytest", action="store_true",
                        help="the pytest gates side by side instead (bench/memray_pytest)")
    args = parser.parse_args()

    build = os.path.abspath(args.build)
    if os.sep in args.python:  # the suite runs in a folder of its own
        args.python = os.path.abspath(args.python)
    cli = os.path.join(build, "bin", "gpuwatch")
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", GPUWATCH_SUMMARY="0")
    if shutil.which("nvidia-smi") is None:
        sim = os.path.join(build, "tests", "sim", "lib")
        env["LD_LIBRARY_PATH"] = sim + ":" + env.get("LD_LIBRARY_PATH", "")
    tmp = args.keep or tempfile.mkdtemp(prefix="memray_compare.")
    os.makedirs(tmp, exist_ok=True)

    if args.pytest:
        side_by_side(args.python, cli, env, tmp)
        if not args.keep:
            shutil.rmtree(tmp)
        return

    runs = {way: [] for way in WAYS}
    printed = ""
    for _ in range(args.rounds):
        for way in WAYS:
            argv = argv_for(way, args.python, cli, tmp, args.steps)
            wall, cpu, rss, printed = run_once(argv, env)
            runs[way].append((wall, cpu, rss))

    print("workload: %s" % printed.strip())
    print("%-9s %10s %10s %12s   (medians of %d rounds)" % ("way", "wall s", "cpu s",
                                                           "peak RSS", args.rounds))
    base = [statistics.median(r[i] for r in runs["none"]) for i in range(3)]
    for way in WAYS:
        wall, cpu, rss = (statistics.median(r[i] for r in runs[way]) for i in range(3))
        print("%-9s %10.2f %10.2f %12s   (x%.2f wall, x%.2f cpu, +%s RSS)" %
              (way, wall, cpu, mib(rss), wall / base[0], cpu / base[1], mib(rss - base[2])))
    for way in ("memray", "both"):
        found = memray_found(os.path.join(tmp, way + ".bin"), args.python)
        print("memray (%s): peak heap %s, %d allocations; host memory still allocated at the "
              "end, by line: %s" % (way, mib(found["peak"]), found["allocations"],
                                    ", ".join("%s %s" % (line, mib(n))
                                              for line, n in found["left_by_line"][:3])))
    for way in ("gpuwatch", "both"):
        found = gpuwatch_found(os.path.join(tmp, way + ".json"))
        print("gpuwatch (%s): device peak %s, live at exit %s: %s; copies: %s; findings: %s" %
              (way, mib(found["peak"]), mib(found["live"]),
               ", ".join("%s %s%s" % (loc, mib(n), " [%s]" % c if c else "")
                         for loc, n, c in found["live_by_line"][:3]),
               ", ".join(found["copies"]), "; ".join(found["findings"]) or "none"))
    if not args.keep:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
