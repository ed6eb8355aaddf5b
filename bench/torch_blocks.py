#!/usr/bin/env python3
"""What `gpuwatch run --torch-blocks` costs, against PyTorch's own snapshot.

Runs a training-like loop (two elementwise layers on a fresh 16 MiB batch,
forward, backward and an SGD step: about 20 tensors allocated and freed per
step through the caching allocator) --steps steps, --repeat times each way,
interleaved:

  none      python loop.py                      no tool
  torch     python loop.py, with PyTorch's own _record_memory_history(
            enabled="state", stacks="python") from the start and one
            torch.cuda.memory._snapshot() at the end (what one would do by
            hand to see the blocks)
  gpuwatch  gpuwatch run -- python loop.py      gpuwatch alone
  blocks    gpuwatch run --torch-blocks -- python loop.py

and prints the medians and the fastest of the loop's time (measured inside
the script: what recording costs per allocation) and of the process's wall
time (start-up, loop, and at exit the snapshot and the report). Without a
GPU (no nvidia-smi) it runs on the simulator.

  GPUWATCH_TORCH_PYTHON=.../bin/python bench/torch_blocks.py --build build --steps 2000
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

LOOP = '''
import sys
import time

import torch

mode, steps = sys.argv[1], int(sys.argv[2])
if mode == "torch":
    torch.cuda.memory._record_memory_history(enabled="state", context="alloc", stacks="python")
# Elementwise layers only: cuBLAS does not run on the simulator (tests/sim/README.md).
w1 = torch.zeros(1 << 18, device="cuda", requires_grad=True)
w2 = torch.zeros(1 << 18, device="cuda", requires_grad=True)
b = torch.zeros(1 << 18, device="cuda", requires_grad=True)
opt = torch.optim.SGD([w1, w2, b], lr=0.01)
start = time.perf_counter()
for _ in range(steps):
    x = torch.randn(16, 1 << 18, device="cuda")
    h = torch.relu(x * w1 + b)
    loss = (h * w2).square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
torch.cuda.synchronize()
loop = time.perf_counter() - start
if mode == "torch":
    t = time.perf_counter()
    snap = torch.cuda.memory._snapshot()
    print(f"snapshot_s {time.perf_counter() - t:.4f}")
    print(f"segments {len(snap['segments'])}")
print(f"loop_s {loop:.4f}")
'''


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--python", default=os.environ.get("GPUWATCH_TORCH_PYTHON", "python3"))
    args = parser.parse_args()

    build = os.path.abspath(args.build)
    cli = os.path.join(build, "bin", "gpuwatch")
    env = dict(os.environ, GPUWATCH_SUMMARY="0", PYTHONDONTWRITEBYTECODE="1")
    env.pop("GPUWATCH_TORCH_PYTHON", None)  # not the library's (it would warn)
    if shutil.which("nvidia-smi") is None:
        sim = os.path.join(build, "tests", "sim", "lib")
        env["LD_LIBRARY_PATH"] = sim + ":" + env.get("LD_LIBRARY_PATH", "")
        print(f"no GPU: on the simulator ({sim})")
    tmp = tempfile.mkdtemp(prefix="gpuwatch-torch-blocks-bench-")
    script = os.path.join(tmp, "loop.py")
    with open(script, "w") as f:
        f.write(LOOP)
    out = os.path.join(tmp, "report.json")
    ways = {
        "none": [args.python, script, "none", str(args.steps)],
        "torch": [args.python, script, "torch", str(args.steps)],
        "gpuwatch": [cli, "run", "-o", out, "--", args.python, script, "none", str(args.steps)],
        "blocks": [cli, "run", "-o", out, "--torch-blocks", "--", args.python, script, "none",
                   str(args.steps)],
    }
    loops = {w: [] for w in ways}
    walls = {w: [] for w in ways}
    snapshots = []
    aborted = 0
    for _ in range(args.repeat):
        for way, argv in ways.items():
            # PyTorch on the simulator sometimes aborts at exit ("terminate called without an
            # active exception", without gpuwatch too): such a run is timed again.
            for _attempt in range(12):
                start = time.perf_counter()
                r = subprocess.run(argv, env=env, cwd=tmp, capture_output=True, text=True)
                wall = time.perf_counter() - start
                if "terminate called without an active exception" not in r.stderr:
                    break
                aborted += 1
            if r.returncode != 0:
                sys.exit(f"{way} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
            values = dict(line.split(" ", 1) for line in r.stdout.splitlines() if " " in line)
            loops[way].append(float(values["loop_s"]))
            walls[way].append(wall)
            if "snapshot_s" in values:
                snapshots.append(float(values["snapshot_s"]))
    print(f"{args.steps} steps, {args.repeat} runs each")
    print(f"{'way':10} {'loop':>9} {'per step':>10} {'fastest':>10} {'process':>9} {'fastest':>9}")
    for way in ways:
        loop = statistics.median(loops[way])
        print(f"{way:10} {loop:8.3f}s {loop / args.steps * 1e6:8.1f}us "
              f"{min(loops[way]) / args.steps * 1e6:8.1f}us "
              f"{statistics.median(walls[way]):8.3f}s {min(walls[way]):8.3f}s")
    if snapshots:
        print(f"PyTorch's _snapshot() at the end of the loop: median {statistics.median(snapshots):.4f}s "
              f"(the process's first)")
    if aborted:
        print(f"{aborted} runs aborted at exit by PyTorch on the simulator, timed again")
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
