# Run by pytest with --gpuwatch-torch-blocks under `gpuwatch run`
# (tests/e2e/torch_blocks_test.cc), with ./torch (a stand-in) importable.
import gpuwatch
import torch


def make(size):
    return torch.cuda.empty(size)  # FAKE:make


def test_blocks_reach_the_snapshot_report():
    kept = make(3 << 20)  # FAKE:test
    assert kept != 0
    assert torch.cuda.memory._recording
    assert gpuwatch.snapshot("fake torch")
