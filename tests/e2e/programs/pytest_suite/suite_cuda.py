"""Device memory for the suite next to it, from the simulated CUDA runtime
through ctypes, as Python code without a framework would allocate it."""
import ctypes

cudart = ctypes.CDLL("libcudart.so.13")
cudart.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
cudart.cudaMalloc.restype = ctypes.c_int
cudart.cudaFree.argtypes = [ctypes.c_void_p]
cudart.cudaFree.restype = ctypes.c_int


def malloc(nbytes):
    pointer = ctypes.c_void_p()
    assert cudart.cudaMalloc(ctypes.byref(pointer), nbytes) == 0  # SUITE:malloc
    return pointer.value


def free(pointer):
    assert cudart.cudaFree(pointer) == 0


def kept_by_library(nbytes):
    """Memory a library keeps on purpose: the suite's suppressions file names
    this function."""
    return malloc(nbytes)  # SUITE:kept_by_library
