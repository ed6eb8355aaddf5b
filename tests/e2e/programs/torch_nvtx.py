# Real PyTorch on the simulator (tests/e2e/torch_modes_test.cc), run with
# PYTORCH_NO_CUDA_MEMORY_CACHING=1 so that each tensor is a cudaMalloc of its own: allocations
# inside ranges of torch.cuda.nvtx (range_push/range_pop, the range context manager) and of
# torch.autograd.profiler.emit_nvtx, which names a range after each operator.
import torch

with torch.cuda.nvtx.range("load"):
    x = torch.empty(1 << 20, device="cuda")  # PHASE:load (4 MiB)
torch.cuda.nvtx.range_push("step")
y = torch.empty(2 << 20, device="cuda")  # PHASE:step (8 MiB)
torch.cuda.nvtx.range_push("forward")
z = torch.empty(3 << 20, device="cuda")  # PHASE:step/forward (12 MiB)
torch.cuda.nvtx.range_pop()
torch.cuda.nvtx.range_pop()
del x, y, z
with torch.autograd.profiler.emit_nvtx():
    w = torch.ones(1 << 18, device="cuda")  # PHASE:emit_nvtx (1 MiB)
torch.cuda.synchronize()
print("torch_nvtx: done", flush=True)
