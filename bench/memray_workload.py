"""The PyTorch script bench/memray_compare.py runs under no tool, memray,
gpuwatch and both. Each step makes a host tensor (CPU memory: malloc, which
memray sees), copies it to the device (a cudaMalloc'd segment or block, which
gpuwatch sees), works on it there and copies the result back; every tenth
step keeps both the device result and its host copy in lists that live to
the end: a host leak for memray and a device leak for gpuwatch, at the lines
marked below. Prints one JSON line with PyTorch's own counters.

    python bench/memray_workload.py [STEPS]
"""
import json
import sys

import torch

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 200
kept_host, kept_device = [], []
for step in range(steps):
    host = torch.randn(256, 1024)  # 1 MiB of host memory
    device = host.to("cuda")  # 1 MiB of device memory and a copy to it
    result = device * 2
    back = result.cpu()  # a copy back into 1 MiB of host memory
    if step % 10 == 0:
        kept_device.append(result)  # MEMRAY_WORKLOAD:device kept, 1 MiB per ten steps
        kept_host.append(back)  # MEMRAY_WORKLOAD:host kept, 1 MiB per ten steps
torch.cuda.synchronize()
print(json.dumps({"steps": steps, "kept": len(kept_device),
                  "allocated": torch.cuda.memory_allocated(),
                  "reserved": torch.cuda.memory_reserved(),
                  "max_reserved": torch.cuda.max_memory_reserved()}), flush=True)
