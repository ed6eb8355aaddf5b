"""Uses the gpuwatch Python package (python/gpuwatch) on the simulated CUDA
runtime. Run by tests/e2e/python_test.cc, under `gpuwatch run` and without
gpuwatch:

    python3 python_module.py

Prints what each call returned; leaks 1 MiB and 2 MiB on device 0 and 4 MiB
on device 1 (when the simulator has two) on the lines marked `# MODULE:...`,
5 MiB of pinned host memory, and 3 MiB inside `gpuwatch.paused()`, which
gpuwatch must not record. The 2 MiB are allocated in the phase
"step/forward" (gpuwatch.phase as a decorator and a block).
"""
import ctypes

import gpuwatch

cudart = ctypes.CDLL("libcudart.so.13")
cudart.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
cudart.cudaMalloc.restype = ctypes.c_int
first, paused, after = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
start = gpuwatch.point()  # before everything this script leaks

assert cudart.cudaMalloc(ctypes.byref(first), 1 << 20) == 0  # MODULE:first
mid = gpuwatch.point()  # after the first leak
marked = gpuwatch.mark("step") and gpuwatch.mark(b"step")
snapped = gpuwatch.snapshot("from python")
with gpuwatch.paused():
    assert cudart.cudaMalloc(ctypes.byref(paused), 3 << 20) == 0  # not recorded
try:
    with gpuwatch.paused():
        raise ValueError("the block fails")
except ValueError:
    pass


@gpuwatch.phase("step")
def step():
    with gpuwatch.phase("forward"):
        assert cudart.cudaMalloc(ctypes.byref(after), 2 << 20) == 0  # MODULE:after_paused


step()
try:
    with gpuwatch.phase("failing"):
        raise ValueError("the block fails")
except ValueError:
    pass
cudart.cudaSetDevice.argtypes = [ctypes.c_int]
on_device1 = ctypes.c_void_p()
if cudart.cudaSetDevice(1) == 0:  # GWSIM_DEVICE_COUNT=2
    assert cudart.cudaMalloc(ctypes.byref(on_device1), 4 << 20) == 0  # MODULE:device1
pinned = ctypes.c_void_p()
cudart.cudaMallocHost.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
assert cudart.cudaMallocHost(ctypes.byref(pinned), 5 << 20) == 0
try:
    gpuwatch.live("no_such_kind")
    unknown = "accepted"
except ValueError:
    unknown = "refused"
print("attached %s version %s mark %s snapshot %s module %s" %
      (gpuwatch.attached(), gpuwatch.version(), marked, snapped, gpuwatch.__version__))
print("start point %s" % start)  # the start's handle (gpuwatch.h): 1
for name, point in (("start", start), ("mid", mid)):
    since = gpuwatch.live_since(point)
    if since is None:
        print("since %s None" % name)
        continue
    print("since %s device %d in %d at %s host %d peak %d" %
          (name, since["device"]["bytes"], since["device"]["count"],
           " ".join("%s=%d" % (site["location"], site["bytes"])
                    for site in since["device"]["sites"]),
           since["host"]["bytes"], since["window_peak_bytes"]))
print("live %s device %s device0 %s device1 %s host %s pinned %s unknown %s" %
      (gpuwatch.live(), gpuwatch.live("device"), gpuwatch.live(device=0), gpuwatch.live(device=1),
       gpuwatch.live("host"), gpuwatch.live("pinned_host"), unknown))
