#!/usr/bin/env python3
"""Marks training iterations for gpuwatch's growth detection, from Python.

A leak in a training loop rarely shows as memory live at exit: it shows as
memory that grows every step. Call gpuwatch_mark() once per step and the
report lists the allocation sites whose live memory rises from mark to mark,
with the rate in bytes per mark:

    gpuwatch run -- python3 examples/mark_iterations.py
    gpuwatch report gpuwatch.<pid>.json

This loop keeps a 1 MiB device buffer per step in a history list (the bug).
It allocates through the CUDA runtime with ctypes so that it needs nothing but
Python; in a PyTorch loop the calls are the same:

    import gpuwatch
    for step, batch in enumerate(loader):
        loss = model(batch).sum(); loss.backward(); optimizer.step()
        gpuwatch.mark("step")

`gpuwatch run` puts the gpuwatch package (python/gpuwatch) on PYTHONPATH; its
calls do nothing when gpuwatch is not attached, so the program runs
unchanged without it.
"""

import argparse
import ctypes
import os
import sys

try:
    import gpuwatch  # on PYTHONPATH under `gpuwatch run`
except ImportError:  # run without it: the package of this repository (python/)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import gpuwatch


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--leak-bytes", type=int, default=1 << 20)
    args = parser.parse_args()

    cudart = ctypes.CDLL("libcudart.so.13")
    cudart.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
    cudart.cudaFree.argtypes = [ctypes.c_void_p]

    history = []
    for step in range(args.steps):
        scratch = ctypes.c_void_p()
        if cudart.cudaMalloc(ctypes.byref(scratch), 4 << 20) != 0:
            sys.exit("cudaMalloc failed")
        cudart.cudaFree(scratch)  # balanced: freed every step
        kept = ctypes.c_void_p()
        if cudart.cudaMalloc(ctypes.byref(kept), args.leak_bytes) != 0:  # kept: the leak
            sys.exit("cudaMalloc failed")
        history.append(kept)
        gpuwatch.mark("step")  # a no-op without gpuwatch

    attached = gpuwatch.attached()
    print("mark_iterations: %d steps, %d buffers kept; %s" %
          (args.steps, len(history),
           "gpuwatch is attached" if attached else "gpuwatch is not loaded"))


if __name__ == "__main__":
    main()
