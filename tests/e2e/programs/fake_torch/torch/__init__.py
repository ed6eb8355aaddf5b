# A stand-in for PyTorch (tests/e2e/torch_blocks_test.cc): just what
# gpuwatch.torch_blocks calls (torch.cuda._lazy_call, the memory history and
# snapshot), over real device memory from the CUDA runtime through ctypes, so
# that the pytest plugin's --gpuwatch-torch-blocks is tested on the machine's
# python3 without a CUDA build of torch. Not PyTorch's behaviour: one segment
# per tensor, one block in it.
from . import cuda  # noqa: F401
