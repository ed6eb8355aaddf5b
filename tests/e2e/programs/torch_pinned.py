# Real PyTorch on the simulator (tests/e2e/torch_modes_test.cc): pinned host memory from
# pin_memory() and from the caching host allocator (a non_blocking copy to the host, whose block
# a later pin_memory() reuses), and copies to the device from pinned and from pageable memory,
# each on its own line. Prints PyTorch's host allocator counters beside gpuwatch's.
import gpuwatch
import torch

pinned = torch.empty(1 << 20).pin_memory()  # PINNED:pin_memory (4 MiB, cudaHostAlloc)
pageable = torch.empty(1 << 20)
dev = pinned.to("cuda", non_blocking=True)  # COPY:pinned (4 MiB H2D from pinned memory)
dev2 = pageable.to("cuda")  # COPY:pageable (4 MiB H2D from pageable memory)
back = dev.to("cpu", non_blocking=True)  # PINNED:host_cache (4 MiB D2H into a new pinned block)
torch.cuda.synchronize()
del back
again = torch.empty(1 << 20).pin_memory()  # reuses back's cached block: no cudaHostAlloc
stats = torch.cuda.host_memory_stats()
print(f"pinned {int(pinned.is_pinned() and again.is_pinned())}")
print(f"host_allocated {stats['allocated_bytes.current']}")
print(f"host_allocs {stats['num_host_alloc']}")
print(f"host_live {gpuwatch.live('pinned_host').bytes}")
print("torch_pinned: done", flush=True)
