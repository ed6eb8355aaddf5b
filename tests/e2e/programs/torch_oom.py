# Real PyTorch on a simulated device of GWSIM_DEVICE_MEMORY bytes (tests/e2e/torch_modes_test.cc):
# two tensors fit, the third does not, and PyTorch raises torch.cuda.OutOfMemoryError at its
# line. The script catches it and prints PyTorch's counters at that moment. TORCH_OOM_BYTES
# overrides the third request (tests/gpu/validate.py asks a real GPU for more than it has).
import os

import torch

a = torch.empty(1 << 20, device="cuda")  # TENSOR:a (4 MiB in a 20 MiB segment)
b = torch.empty(6 << 20, device="cuda")  # TENSOR:b (24 MiB, a segment of its own)
try:
    c = torch.empty(int(os.environ.get("TORCH_OOM_BYTES", 32 << 20)) // 4, device="cuda")  # OOM:c
    print("oom 0")
except torch.cuda.OutOfMemoryError as e:
    print("oom 1")
    print(f"reserved {torch.cuda.memory_reserved()}")
    print(f"allocated {torch.cuda.memory_allocated()}")
    print(f"message {str(e).splitlines()[0][:100]}")
print("torch_oom: done", flush=True)
