# Real PyTorch with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True on the simulator
# (tests/e2e/torch_modes_test.cc): one segment that grows by mapping more VMM handles and
# shrinks at empty_cache(). At each point the script prints PyTorch's counters beside gpuwatch's
# (its Python package) as "POINT.NAME VALUE" lines; a snapshot report while the segment is
# grown, and one tensor left live at exit.
import gpuwatch
import torch


def state(point):
    torch.cuda.synchronize()
    vmm = gpuwatch.live("vmm")
    print(f"{point}.reserved {torch.cuda.memory_reserved()}")
    print(f"{point}.allocated {torch.cuda.memory_allocated()}")
    print(f"{point}.vmm {vmm.bytes}")
    print(f"{point}.handles {vmm.count}")
    print(f"{point}.device {gpuwatch.live().bytes}")


a = torch.empty(1 << 20, device="cuda")  # TENSOR:a (4 MiB: the segment's first handle)
state("first")
b = torch.empty(3 << 20, device="cuda")  # TENSOR:b (12 MiB: fits in it)
state("fits")
c = torch.empty(6 << 20, device="cuda")  # TENSOR:c (24 MiB: the segment grows)
state("grown")
print(f"snapshot {int(gpuwatch.snapshot('grown'))}")
del c
torch.cuda.empty_cache()
state("shrunk")
del a, b
torch.cuda.empty_cache()
state("empty")
d = torch.empty(2 << 20, device="cuda")  # TENSOR:d (8 MiB, live at exit)
state("exit")
print("torch_expandable: done", flush=True)
