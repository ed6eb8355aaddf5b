import ctypes

from . import memory

_cudart = ctypes.CDLL("libcudart.so.13")
_queued = []
_initialized = False


def _lazy_call(fn):
    if _initialized:
        fn()
    else:
        _queued.append(fn)


def init():
    global _initialized
    _cudart.cudaFree(None)  # the runtime starts: gpuwatch attaches
    _initialized = True
    for fn in _queued:
        fn()


def empty(size):
    """A segment of `size` bytes (cudaMalloc) holding one block, recorded
    with the caller's frames while the history is on."""
    if not _initialized:
        init()
    ptr = ctypes.c_void_p()
    assert _cudart.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(size)) == 0  # FAKE:malloc
    memory._add(ptr.value, size)
    return ptr.value
