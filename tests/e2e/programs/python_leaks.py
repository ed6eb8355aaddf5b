"""Leaks device memory through the simulated CUDA runtime from Python.

Run under libgpuwatch.so by tests/e2e/python_test.cc:

    python3 python_leaks.py MODE [HELPER_SO]

Every leaking call sits on a line marked `# LEAK:NAME`, which the test finds
by its marker; each scenario leaks a size of its own (SIZES) so that the test
can tell the sites apart. Works on Python 3.8 and later, standard library only.
"""
import atexit
import ctypes
import sys
import threading

SIZES = {
    "nested": 3 << 20,
    "nested_gil": 5 << 20,
    "thread": 7 << 20,
    "native": 11 << 20,
    "callback": 13 << 20,
    "atexit": 17 << 20,
    "del": 19 << 20,
    "warmup": 1 << 10,
}

cudart = ctypes.CDLL("libcudart.so.13")  # releases the GIL around each call
cudart_gil = ctypes.PyDLL("libcudart.so.13")  # keeps it
for lib in (cudart, cudart_gil):
    lib.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
    lib.cudaMalloc.restype = ctypes.c_int
    lib.cudaFree.argtypes = [ctypes.c_void_p]
    lib.cudaFree.restype = ctypes.c_int

KEPT = []


def check(err):
    if err != 0:
        raise RuntimeError("cudaMalloc failed: %d" % err)


def kept():
    """A new pointer for cudaMalloc to fill, kept (KEPT): what it points to
    stays live."""
    p = ctypes.c_void_p()
    KEPT.append(p)
    return p


def warm_up():
    # The first CUDA call attaches gpuwatch; Python code run after it lets
    # gpuwatch finish its set-up on the main thread (python_stack.h).
    p = ctypes.c_void_p()
    check(cudart.cudaMalloc(ctypes.byref(p), SIZES["warmup"]))
    check(cudart.cudaFree(p))
    sum(i for i in range(1000))


# --- nested: main thread, GIL released by ctypes ---------------------------

def inner():
    check(cudart.cudaMalloc(ctypes.byref(kept()), SIZES["nested"]))  # LEAK:nested


def middle():
    inner()


class Trainer:
    def step(self):
        middle()


def outer():
    Trainer().step()


# --- nested_gil: the same call with the GIL held (ctypes.PyDLL) ------------

def inner_gil():
    check(cudart_gil.cudaMalloc(ctypes.byref(kept()), SIZES["nested_gil"]))  # LEAK:nested_gil


def outer_gil():
    inner_gil()


# --- thread: a threading.Thread ---------------------------------------------

def thread_alloc():
    check(cudart.cudaMalloc(ctypes.byref(kept()), SIZES["thread"]))  # LEAK:thread


def thread_main():
    thread_alloc()


def run_thread():
    t = threading.Thread(target=thread_main, name="allocator")
    t.start()
    t.join()


# --- native / callback: threads created by native code ----------------------

CALLBACK = ctypes.CFUNCTYPE(None)


def callback_alloc():
    check(cudart.cudaMalloc(ctypes.byref(kept()), SIZES["callback"]))  # LEAK:callback


def run_native(helper_path):
    helper = ctypes.CDLL(helper_path)
    helper.gw_native_thread_alloc.argtypes = [ctypes.c_size_t]
    helper.gw_native_thread_alloc.restype = ctypes.c_int
    check(helper.gw_native_thread_alloc(SIZES["native"]))


def run_callback(helper_path):
    helper = ctypes.CDLL(helper_path)
    helper.gw_native_thread_call.argtypes = [CALLBACK]
    helper.gw_native_thread_call.restype = ctypes.c_int
    callback = CALLBACK(callback_alloc)
    check(helper.gw_native_thread_call(callback))


# --- shutdown / daemons: atexit, __del__ at finalization, daemon threads ----

def at_exit():
    check(cudart.cudaMalloc(ctypes.byref(kept()), SIZES["atexit"]))  # LEAK:atexit


class AllocatesWhenCollected:
    """Allocates from __del__, which runs while the interpreter finalizes."""

    def __init__(self):
        # Module globals may be gone when __del__ runs: keep what it needs.
        self.malloc = cudart.cudaMalloc
        self.c_void_p = ctypes.c_void_p
        self.byref = ctypes.byref
        self.size = SIZES["del"]

    def __del__(self):
        p = self.c_void_p()
        self.malloc(self.byref(p), self.size)  # LEAK:del


def churn(helper):
    # A daemon thread inside CUDA, without the GIL, until the process ends;
    # the loop is in C (see py_native_helper.c for why).
    helper.gw_churn_forever()


def run_shutdown():
    atexit.register(at_exit)
    global COLLECTED_AT_EXIT
    COLLECTED_AT_EXIT = AllocatesWhenCollected()


def run_daemons(helper_path):
    # With daemon threads alive the interpreter does not collect module
    # globals at exit, so this mode has no __del__ allocation.
    helper = ctypes.CDLL(helper_path)
    atexit.register(at_exit)
    for _ in range(4):
        threading.Thread(target=churn, args=(helper,), daemon=True).start()
    sum(i for i in range(100000))  # let them run a little


def main():
    mode = sys.argv[1]
    warm_up()
    if mode == "nested":
        outer()
        outer_gil()
    elif mode == "thread":
        run_thread()
    elif mode == "native":
        run_native(sys.argv[2])
    elif mode == "callback":
        run_callback(sys.argv[2])
    elif mode == "shutdown":
        run_shutdown()
    elif mode == "daemons":
        run_daemons(sys.argv[2])
    else:
        raise SystemExit("unknown mode " + mode)
    print("python_leaks: " + mode + " done")


if __name__ == "__main__":
    main()
