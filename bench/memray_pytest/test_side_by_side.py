"""pytest-memray's gates and gpuwatch's on the same PyTorch tests
(bench/memray_compare.py --pytest runs the file twice: `pytest --memray`,
and `gpuwatch run -- pytest`; docs/testing.md quotes both). Each test's
comment says what it does to host and to device memory."""
import pytest
import torch

KEPT = []
torch.empty(1, device="cuda")  # CUDA's start, in no test


@pytest.mark.limit_memory("8 MB")  # pytest-memray: the host peak
@pytest.mark.limit_gpu_memory("8 MB")  # gpuwatch: the device peak
def test_host_and_device_over_8_mb():
    host = torch.empty(4 << 20)  # PEAK:host 16 MiB of host memory
    device = torch.empty(4 << 20, device="cuda")  # PEAK:device 16 MiB of device memory
    del host, device


@pytest.mark.limit_leaks("1 MB")  # pytest-memray: host memory left allocated, per location
@pytest.mark.gpuwatch(max_leak="1 MB")  # gpuwatch: device memory left live
def test_keeps_host_and_device():
    KEPT.append(torch.ones(1 << 20))  # LEAK:host 4 MiB of host memory, kept
    KEPT.append(torch.ones(1 << 20, device="cuda"))  # LEAK:device 4 MiB of device memory, kept
