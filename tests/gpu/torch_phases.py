"""Phases from PyTorch (tests/gpu/validate.py, part torch_phases): three
steps, each with torch.cuda.nvtx ranges "step" and "forward" (NVTX in
libtorch) and gpuwatch.phase("backward") (the package), keeping the forward's
16 MiB and freeing the backward's 8 MiB. With a per-tensor allocator mode the
phases of the snapshot taken at the end hold exactly: step/forward 3 x 16 MiB
allocated and live, step/backward 3 x 8 MiB allocated and none live.
"""
import torch

import gpuwatch

MiB = 1 << 20
kept = []
torch.cuda.init()
torch.empty(1, device="cuda")  # the context, outside every phase
for step in range(3):
    torch.cuda.nvtx.range_push("step")
    torch.cuda.nvtx.range_push("forward")
    kept.append(torch.empty(16 * MiB, dtype=torch.uint8, device="cuda"))
    torch.cuda.nvtx.range_pop()
    with gpuwatch.phase("backward"):
        scratch = torch.empty(8 * MiB, dtype=torch.uint8, device="cuda")
        del scratch
    torch.cuda.nvtx.range_pop()
torch.cuda.synchronize()
# A report while `kept` is alive (<output>.snapshot-1): at exit, Python frees
# it before gpuwatch writes its exit report.
gpuwatch.snapshot("phases")
print("torch_phases: done, gpuwatch attached: %s" % gpuwatch.attached())
