"""PyTorch tests for gpuwatch's pytest plugin on a GPU (tests/gpu/validate.py,
part torch_pytest): one test keeps a 16 MiB tensor, one drops its own, one
uses a module fixture's model. Run with --gpuwatch-max-leak=0 under each
allocator mode: with every tensor an allocation of its own
(PYTORCH_NO_CUDA_MEMORY_CACHING=1) only test_keeps_a_tensor must fail, at the
line marked below; under the caching allocator what fails is the question."""
import pytest
import torch

KEPT = []


@pytest.fixture(scope="module")
def model():
    return torch.nn.Linear(1024, 1024).cuda()


def test_keeps_a_tensor():
    KEPT.append(torch.empty(4 << 20, device="cuda"))  # TORCH_PYTEST:leak


def test_drops_its_tensor():
    x = torch.ones(4 << 20, device="cuda")
    assert float(x.sum()) == 4 << 20


def test_uses_the_module_model(model):
    assert model(torch.ones(8, 1024, device="cuda")).shape == (8, 1024)
