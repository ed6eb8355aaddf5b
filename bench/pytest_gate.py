#!/usr/bin/env python3
"""What gpuwatch's pytest plugin adds per test (docs/testing.md).

Writes a suite of --tests tests, each allocating and freeing 1 MiB of device
memory through ctypes, after --live allocations of 4 KiB made at collection
and kept for the whole run (a process that holds a lot while its tests run).
Runs it under `gpuwatch run`, --repeat times each way, interleaved:

  plain   python -m pytest -q            (the plugin is loaded, asked nothing)
  gate    python -m pytest -q --gpuwatch --gpuwatch-max-leak=0

and prints the medians and (gate - plain) / tests, of the medians and of the
fastest runs: the plugin's cost per test, which is its gpuwatch_point()/gpuwatch_live_since() calls and the
Python around them. Without a GPU (no nvidia-smi) it runs on the simulator.

  bench/pytest_gate.py --build build --tests 500 --live 100000
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

SUITE = '''
import ctypes

cudart = ctypes.CDLL("libcudart.so.13")
cudart.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
cudart.cudaFree.argtypes = [ctypes.c_void_p]

HELD = []
for _ in range({live}):
    p = ctypes.c_void_p()
    assert cudart.cudaMalloc(ctypes.byref(p), 4096) == 0
    HELD.append(p)


def one_test():
    p = ctypes.c_void_p()
    assert cudart.cudaMalloc(ctypes.byref(p), 1 << 20) == 0
    assert cudart.cudaFree(p) == 0

'''


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--tests", type=int, default=500)
    parser.add_argument("--live", type=int, default=100000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--python", default="/usr/bin/python3", help="a python with pytest")
    args = parser.parse_args()

    build = os.path.abspath(args.build)
    env = dict(os.environ, GPUWATCH_SUMMARY="0", PYTHONDONTWRITEBYTECODE="1")
    if shutil.which("nvidia-smi") is None:
        env["LD_LIBRARY_PATH"] = os.path.join(build, "tests/sim/lib")
        where = "the simulator"
    else:
        where = "the GPU"
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "test_gate_bench.py"), "w") as f:
            f.write(SUITE.format(live=args.live))
            for i in range(args.tests):
                f.write("def test_%d():\n    one_test()\n\n" % i)
        base = [os.path.join(build, "bin/gpuwatch"), "run", "-o", os.path.join(tmp, "r.json"),
                "--", args.python, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        runs = {"plain": [], "gate": []}
        for _ in range(args.repeat):
            for name, extra in (("plain", []), ("gate", ["--gpuwatch", "--gpuwatch-max-leak=0"])):
                start = time.perf_counter()
                r = subprocess.run(base + extra, cwd=tmp, env=env, capture_output=True, text=True)
                runs[name].append(time.perf_counter() - start)
                if r.returncode != 0:
                    sys.exit("pytest_gate: %s run failed (%d):\n%s%s" %
                             (name, r.returncode, r.stdout[-2000:], r.stderr[-2000:]))
    plain, gate = statistics.median(runs["plain"]), statistics.median(runs["gate"])
    print("%d tests, %d live allocations held, on %s, median of %d:" %
          (args.tests, args.live, where, args.repeat))
    print("  plain  %.3f s   (%s)" % (plain, " ".join("%.3f" % t for t in runs["plain"])))
    print("  gate   %.3f s   (%s)" % (gate, " ".join("%.3f" % t for t in runs["gate"])))
    print("  per test: %.0f us (medians), %.0f us (fastest runs)" %
          ((gate - plain) / args.tests * 1e6,
           (min(runs["gate"]) - min(runs["plain"])) / args.tests * 1e6))


if __name__ == "__main__":
    main()
