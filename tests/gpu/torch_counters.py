"""gpuwatch against PyTorch's own counters (tests/gpu/validate.py, part
torch_counters), under whichever allocator PYTORCH_CUDA_ALLOC_CONF selects;
the same checks as tests/e2e/torch_test.cc on the simulator, for a real
driver. Prints one JSON line; validate.py compares it with the report.

  tensors   4 MiB and 12 MiB live: gpuwatch.live() beside memory_reserved()
            (the caching allocator's segments), memory_allocated() and the
            tensors' bytes (PYTORCH_NO_CUDA_MEMORY_CACHING=1: PyTorch's
            counters stay 0)
  pinned    a pinned 4 MiB host tensor (pin_memory()) copied to the device
            with non_blocking=True: a pinned host-to-device copy at its line
  oom       a tensor twice the device's memory: torch.cuda.OutOfMemoryError
            (torch.AcceleratorError, "CUDA error: out of memory", with
            PYTORCH_NO_CUDA_MEMORY_CACHING=1, whose uncached path checks
            cudaMalloc's error as any other), and gpuwatch's out-of-memory
            report at its line, with PyTorch's reserved and allocated bytes
            just after
"""
import json

import torch

import gpuwatch

a = torch.empty(1 << 20, device="cuda")  # TORCH_COUNTERS:a
b = torch.empty(3 << 20, device="cuda")  # TORCH_COUNTERS:b
torch.cuda.synchronize()
live = gpuwatch.live()
figures = {"attached": gpuwatch.attached(), "reserved": torch.cuda.memory_reserved(),
           "allocated": torch.cuda.memory_allocated(), "live": live.bytes if live else None,
           # what the tensors hold: PyTorch counts nothing with its cache off
           "tensors": sum(t.untyped_storage().nbytes() for t in (a, b))}

host = torch.empty(1 << 20).pin_memory()
device = host.to("cuda", non_blocking=True)  # TORCH_COUNTERS:pinned
torch.cuda.synchronize()
host_live = gpuwatch.live("host")
figures["pinned_live"] = host_live.bytes if host_live else None

free, total = torch.cuda.mem_get_info()
try:
    torch.empty(2 * total, dtype=torch.uint8, device="cuda")  # TORCH_COUNTERS:oom
    figures["oom"] = None
except RuntimeError as e:  # OutOfMemoryError and AcceleratorError are RuntimeErrors
    figures["oom"] = type(e).__name__
figures["oom_reserved"] = torch.cuda.memory_reserved()
figures["oom_allocated"] = torch.cuda.memory_allocated()
print(json.dumps(figures), flush=True)
