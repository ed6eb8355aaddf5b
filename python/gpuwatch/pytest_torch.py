"""PyTorch's view of device memory, for the pytest plugin (pytest_plugin.py):
under PyTorch's caching allocator gpuwatch sees segments, and a test is
judged by what PyTorch's tensors hold. Never imports torch: each function
looks for a torch the suite imported, with its CUDA initialised."""

import os
import sys


def initialized_cuda():
    """torch.cuda where the suite imported torch and its CUDA is initialised,
    else None. Never imports torch."""
    cuda = getattr(sys.modules.get("torch"), "cuda", None)
    try:
        return cuda if cuda is not None and cuda.is_initialized() else None
    except Exception:  # pylint: disable=broad-except  # a torch without CUDA, a broken one
        return None


def caching_cuda():
    """torch.cuda where PyTorch's caching allocator holds the process's
    device memory (the native backend, caching not turned off), else None."""
    cuda = initialized_cuda()
    if cuda is None or os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING") == "1":
        return None
    try:
        return cuda if cuda.get_allocator_backend() == "native" else None
    except Exception:  # pylint: disable=broad-except
        return None


def let_go():
    """What PyTorch keeps that no test owns, let go before a leak is judged
    again, as PyTorch's own leak check does (CudaMemoryLeakCheck): cuBLAS's
    workspaces, and the cache."""
    torch = sys.modules.get("torch")
    if initialized_cuda() is None:
        return
    clear = getattr(getattr(torch, "_C", None), "_cuda_clearCublasWorkspaces", None)
    if clear is not None:
        clear()
    if caching_cuda() is not None:
        torch.cuda.empty_cache()


def summed(cuda, what):
    """cuda.WHAT(device) summed over the devices; 0 without cuda."""
    if cuda is None:
        return 0
    return sum(getattr(cuda, what)(d) for d in range(cuda.device_count()))


def allocated(cuda):
    return summed(cuda, "memory_allocated")


def peak_start(cuda):
    """Resets PyTorch's peaks: (allocated, reserved) now, the base of the
    call's peak."""
    for d in range(cuda.device_count()):
        cuda.reset_peak_memory_stats(d)
    return summed(cuda, "memory_allocated"), summed(cuda, "memory_reserved")
