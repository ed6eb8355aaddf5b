"""Real PyTorch tests for gpuwatch's pytest plugin (tests/e2e/torch_pytest_test.cc),
run with --gpuwatch-max-leak=0 under the default caching allocator and under
PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync, on the simulator. What each
test does to device memory is said beside it; the e2e test asserts what the
plugin makes of it, the same under both allocators. test_frees_everything
comes first: what it frees stays in PyTorch's cache, where the next test's
tensor would fit."""
import pytest
import torch

KEPT = []  # a module-level list: what a test appends outlives it


@pytest.fixture(scope="module")
def weights():
    return torch.ones(1 << 20, device="cuda")  # 4 MiB for the module: not a test's leak


def test_frees_everything():
    x = torch.ones(4 << 20, device="cuda")  # 16 MiB, freed when the test returns
    y = x + 1
    assert y.shape == x.shape


def test_keeps_a_tensor():
    KEPT.append(torch.empty(1 << 20, device="cuda"))  # TORCH_SUITE:leak 4 MiB, kept


def test_uses_the_module_weights(weights):
    assert (weights * 2).numel() == 1 << 20  # a temporary 4 MiB, freed


@pytest.mark.limit_gpu_memory("8 MB")
def test_needs_more_than_its_limit():
    x = torch.empty(4 << 20, device="cuda")  # 16 MiB at its peak, over 8 MiB
    del x


@pytest.mark.limit_gpu_memory("24 MB")
def test_needs_less_than_its_limit():
    x = torch.empty(4 << 20, device="cuda")  # 16 MiB, under 24 MiB
    del x
