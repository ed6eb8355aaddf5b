"""gpuwatch's C API from Python, for the Python examples (mark_iterations.py,
torch_leak.py): import it from a script next to it.

The API is looked up in the process itself: with `gpuwatch run` or
LD_PRELOAD the library is already loaded, and without gpuwatch the lookup
finds nothing and the program runs unchanged.
"""

import ctypes
import os


def gpuwatch_api():
    """gpuwatch's C API when libgpuwatch.so is loaded in this process, else None."""
    candidates = [None]  # None: the symbols of the process (LD_PRELOAD, gpuwatch run)
    injected = os.environ.get("CUDA_INJECTION64_PATH")
    if injected:
        candidates.append(injected)  # loaded by the CUDA driver
    for name in candidates:
        try:
            if name is None:
                lib = ctypes.CDLL(None)
            else:  # only if already loaded: never load gpuwatch from here
                lib = ctypes.CDLL(name, mode=os.RTLD_NOLOAD | os.RTLD_NOW)
        except OSError:
            continue
        if hasattr(lib, "gpuwatch_mark"):
            lib.gpuwatch_mark.argtypes = [ctypes.c_char_p]
            lib.gpuwatch_mark.restype = ctypes.c_int
            lib.gpuwatch_is_active.restype = ctypes.c_int
            return lib
    return None
