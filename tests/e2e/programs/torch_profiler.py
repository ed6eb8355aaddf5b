# Real PyTorch's profiler (Kineto, a second CUPTI client) in a run under gpuwatch
# (tests/e2e/torch_modes_test.cc), with PYTORCH_NO_CUDA_MEMORY_CACHING=1 so that each tensor is
# an allocation of its own. The same work runs twice: inside torch.profiler.profile (started
# before the first CUDA call, so that under CUDA_INJECTION64_PATH Kineto subscribes to CUPTI
# before gpuwatch attaches) and without it, each in an NVTX range, for the test to compare
# gpuwatch's figures of the two. Prints what the profiler collected.
import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile


def work():
    x = torch.empty(1 << 20, device="cuda")  # WORK:alloc (4 MiB)
    y = torch.ones(2 << 20, device="cuda")  # WORK:kernel (8 MiB and the fill kernel)
    h = y.to("cpu")  # WORK:copy (8 MiB device to host)
    torch.cuda.synchronize()
    return h.numel() + x.numel()


with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
    with torch.cuda.nvtx.range("profiled"):
        work()
with torch.cuda.nvtx.range("plain"):
    work()

events = prof.events()
cuda = [e.name for e in events if e.device_type == DeviceType.CUDA]
cpu = {e.name for e in events if e.device_type == DeviceType.CPU}
print(f"cuda_events {len(cuda)}")
print(f"kernels {sum('FillFunctor' in n for n in cuda)}")
print(f"memcpys {sum(n.startswith('Memcpy DtoH') for n in cuda)}")
for name in ("cudaLaunchKernel", "cudaMemcpyAsync", "aten::fill_", "aten::copy_"):
    print(f"cpu:{name} {int(name in cpu)}")
averages = {a.key: a for a in prof.key_averages()}
print(f"fill_cuda_us {int(averages['aten::fill_'].device_time_total > 0)}")
print("torch_profiler: done", flush=True)
