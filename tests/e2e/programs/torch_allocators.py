# Real PyTorch on the simulator (tests/e2e/torch_test.cc) under whichever
# allocator PYTORCH_CUDA_ALLOC_CONF selects: two tensors made on two lines, and
# while both are live, PyTorch's counters and gpuwatch's (its Python package),
# then a snapshot report (<output>.snapshot-1) for the test to read the sites.
import gpuwatch
import torch

a = torch.empty(1 << 20, device="cuda")  # TENSOR:a
b = torch.empty(3 << 20, device="cuda")  # TENSOR:b
torch.cuda.synchronize()
print(f"attached {int(gpuwatch.attached())}")
print(f"reserved {torch.cuda.memory_reserved()}")
print(f"allocated {torch.cuda.memory_allocated()}")
print(f"live {gpuwatch.live().bytes}")
print(f"snapshot {int(gpuwatch.snapshot('tensors'))}")
del a, b
print("torch_allocators: done", flush=True)
