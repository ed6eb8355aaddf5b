# Real PyTorch whose elementwise kernel faults (tests/e2e/torch_test.cc, run with
# GWSIM_FAULT_KERNEL=MulFunctor): the multiplication's launch succeeds, the illegal address
# surfaces at the copy back to the host, and PyTorch raises there (torch.AcceleratorError, a
# RuntimeError: "CUDA error: an illegal memory access was encountered"), which ends
# the script (exit 1).
import torch

x = torch.ones(1 << 16, device="cuda")
torch.cuda.synchronize()  # the last good synchronization
y = x * 2  # LAUNCH:mul
print("launched", flush=True)
print(y.cpu()[:4])  # SURFACES
print("torch_fault: done", flush=True)
