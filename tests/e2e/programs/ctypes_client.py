"""A CUPTI client written with ctypes, as cupti-python and small tools are:
libcupti is dlopened and each function looked up with dlsym on its handle.
It subscribes, counts the ENTER and EXIT callbacks of cudaMalloc and
cudaFree around three allocations, and prints what it saw; the same lines
must come out with and without gpuwatch in the process
(tests/e2e/cupti_clients_test.cc)."""
import ctypes

cupti = ctypes.CDLL("libcupti.so.13")
cudart = ctypes.CDLL("libcudart.so.13")

RUNTIME_DOMAIN = 2  # CUPTI_CB_DOMAIN_RUNTIME_API
MALLOC = 20         # CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020
FREE = 22           # CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020

Callback = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p)
seen = {}


def on_callback(_userdata, domain, cbid, data):
    site = ctypes.cast(data, ctypes.POINTER(ctypes.c_int))[0]  # callbackSite comes first
    key = (domain, cbid, "enter" if site == 0 else "exit")
    seen[key] = seen.get(key, 0) + 1


callback = Callback(on_callback)
subscriber = ctypes.c_void_p()
print("subscribe:", cupti.cuptiSubscribe(ctypes.byref(subscriber), callback, None))
for cbid in (MALLOC, FREE):
    print("enable", cbid, cupti.cuptiEnableCallback(1, subscriber, RUNTIME_DOMAIN, cbid))
pointer = ctypes.c_void_p()
for _ in range(3):
    assert cudart.cudaMalloc(ctypes.byref(pointer), ctypes.c_size_t(1 << 20)) == 0
    assert cudart.cudaFree(pointer) == 0
for key in sorted(seen):
    print("callback", *key, seen[key])
print("unsubscribe:", cupti.cuptiUnsubscribe(subscriber))
