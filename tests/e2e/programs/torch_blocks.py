# PyTorch's blocks in gpuwatch's report (tests/e2e/torch_blocks_test.cc), run
# under `gpuwatch run --torch-blocks`: two tensors made on two known lines
# (one through a helper) share one segment of the caching allocator; a
# snapshot report while both are live, then the second is freed and the exit
# report has the first alone. PyTorch's counters are printed for the test.
import gpuwatch
import torch


def make(n):
    return torch.zeros(n, device="cuda")  # BLOCK:make


a = torch.zeros(1 << 20, device="cuda")  # BLOCK:a
b = make(3 << 20)  # BLOCK:b
torch.cuda.synchronize()
print(f"snapshot_allocated {torch.cuda.memory_allocated()}")
print(f"snapshot {int(gpuwatch.snapshot('tensors'))}")
del b
print(f"reserved {torch.cuda.memory_reserved()}")
print(f"allocated {torch.cuda.memory_allocated()}")
print(f"live {gpuwatch.live().bytes}")
print("torch_blocks: done", flush=True)
