"""A warm-up paused before the process's first CUDA call, the way
gpuwatch.paused()'s users write one: under Python gpuwatch attaches at that
first call, inside the paused block, and the pause must hold from the attach
on (tests/e2e/python_test.cc). Prints what pause() and resume() returned."""
import ctypes

import gpuwatch

cudart = ctypes.CDLL("libcudart.so.13")
cudart.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
cudart.cudaMalloc.restype = ctypes.c_int

attached_before = gpuwatch.attached()
paused = gpuwatch.pause()
warm = ctypes.c_void_p()
assert cudart.cudaMalloc(ctypes.byref(warm), 3 << 20) == 0  # PAUSE:warm (kept, not recorded)
resumed = gpuwatch.resume()
kept = ctypes.c_void_p()
assert cudart.cudaMalloc(ctypes.byref(kept), 1 << 20) == 0  # PAUSE:kept
print("attached before", attached_before, "pause", paused, "resume", resumed,
      "attached after", gpuwatch.attached())
