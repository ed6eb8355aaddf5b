#!/usr/bin/env python3
"""What one hand-over of PyTorch's blocks costs, by the number of live blocks
(docs/BENCHMARKS.md, "PyTorch's blocks"): torch.cuda.memory._snapshot(),
gpuwatch.torch_blocks.reduce(), json.dumps and gpuwatch_torch_blocks(), best
of 5, with 100, 1,000 and 10,000 tensors of 4 KiB live. Run it under
gpuwatch with the torch environment's python:

  gpuwatch run -- .../bin/python bench/torch_blocks_handover.py
"""
import ctypes
import json
import os
import time

import gpuwatch
import gpuwatch.torch_blocks as tb
import torch


def main():
    tb.install()
    torch.cuda.init()
    api = gpuwatch._find()
    if api is None:
        raise SystemExit("run it under gpuwatch (gpuwatch run -- python ...)")
    api.gpuwatch_torch_blocks.restype = ctypes.c_int
    api.gpuwatch_torch_blocks.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    torch_dir = os.path.dirname(torch.__file__) + os.sep
    kept = []
    for n in (100, 1000, 10000):
        while len(kept) < n:
            kept.append(torch.empty(1024, device="cuda"))
        best = [float("inf")] * 4
        for _ in range(5):
            t0 = time.perf_counter()
            snap = torch.cuda.memory._snapshot()
            t1 = time.perf_counter()
            doc = tb.reduce(snap, "bench", torch_dir)
            t2 = time.perf_counter()
            text = json.dumps(doc, separators=(",", ":")).encode()
            t3 = time.perf_counter()
            if api.gpuwatch_torch_blocks(text, len(text)) != 0:
                raise SystemExit("gpuwatch_torch_blocks refused the hand-over")
            t4 = time.perf_counter()
            for i, v in enumerate((t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
                best[i] = min(best[i], v)
        print(f"{n} blocks: _snapshot {best[0] * 1e3:.2f} ms, reduce {best[1] * 1e3:.2f} ms, "
              f"json {best[2] * 1e3:.2f} ms, gpuwatch_torch_blocks {best[3] * 1e3:.2f} ms, "
              f"{len(text)} bytes")


if __name__ == "__main__":
    main()
