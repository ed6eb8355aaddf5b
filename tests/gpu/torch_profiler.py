"""torch.profiler beside gpuwatch (tests/gpu/validate.py, part torch_profiler).

A few steps of a small model; with --profile the middle steps run inside
torch.profiler.profile(activities=[CPU, CUDA]). Prints one JSON line: what the
profiler saw of the GPU (kernels, copies; CUPTI's records through Kineto) and
the memory PyTorch counts. Run with and without gpuwatch: the profiler's
counts must be the same (gpuwatch shares CUPTI), and gpuwatch's report must
be the same with and without --profile (the window changes nothing of it).
"""
import json
import sys

import torch


def step(model, x):
    y = model(x)
    y.sum().backward()
    host = y.detach().cpu()  # a device-to-host copy
    return host


def main():
    profile = "--profile" in sys.argv
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 16)).cuda()
    x = torch.randn(64, 256).cuda()  # a host-to-device copy
    step(model, x)
    kernels = copies = 0
    if profile:
        activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=activities) as prof:
            for _ in range(3):
                step(model, x)
            torch.cuda.synchronize()
        for e in prof.events():
            if str(getattr(e, "device_type", "")).endswith("CUDA"):
                name = e.name.lower()
                if "memcpy" in name:
                    copies += 1
                else:
                    kernels += 1
    else:
        for _ in range(3):
            step(model, x)
        torch.cuda.synchronize()
    step(model, x)
    torch.cuda.synchronize()
    print(json.dumps({"profiled": profile, "gpu_kernels": kernels, "gpu_copies": copies,
                      "allocated": torch.cuda.memory_allocated(),
                      "reserved": torch.cuda.memory_reserved()}))


if __name__ == "__main__":
    main()
