# Real PyTorch on the simulator (tests/e2e/torch_test.cc): one tensor whose
# creation makes the caching allocator reserve a segment, arithmetic on it and
# a copy back, then PyTorch's own counters, printed for the test to compare
# with gpuwatch's report. Kernels do not compute on the simulator, so no value
# is checked here.
import torch

print(f"available {int(torch.cuda.is_available())}", flush=True)
x = torch.zeros(1 << 20, device="cuda")  # SEGMENT:zeros
y = x + 1
host = y.cpu()
torch.cuda.synchronize()
print(f"copied {host.numel()}")
print(f"reserved {torch.cuda.memory_reserved()}")
print(f"allocated {torch.cuda.memory_allocated()}")
print("torch_segments: done", flush=True)
