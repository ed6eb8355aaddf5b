"""Uses the gpuwatch Python package (python/gpuwatch) on the simulated CUDA
runtime. Run by tests/e2e/python_test.cc, under `gpuwatch run` and without
gpuwatch:

    python3 python_module.py

Prints one line of what each call returned; leaks 1 MiB and 2 MiB on the
lines marked `# MODULE:...`, and 3 MiB inside `gpuwatch.paused()`, which
gpuwatch must not record.
"""
import ctypes

import gpuwatch

cudart = ctypes.CDLL("libcudart.so.13")
cudart.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
cudart.cudaMalloc.restype = ctypes.c_int
first, paused, after = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()

assert cudart.cudaMalloc(ctypes.byref(first), 1 << 20) == 0  # MODULE:first
marked = gpuwatch.mark("step") and gpuwatch.mark(b"step")
snapped = gpuwatch.snapshot("from python")
with gpuwatch.paused():
    assert cudart.cudaMalloc(ctypes.byref(paused), 3 << 20) == 0  # not recorded
try:
    with gpuwatch.paused():
        raise ValueError("the block fails")
except ValueError:
    pass
assert cudart.cudaMalloc(ctypes.byref(after), 2 << 20) == 0  # MODULE:after_paused
print("attached %s version %s mark %s snapshot %s module %s" %
      (gpuwatch.attached(), gpuwatch.version(), marked, snapped, gpuwatch.__version__))
