# A Python program that never imports torch, run under `gpuwatch run
# --torch-blocks` (tests/e2e/torch_blocks_test.cc): the shim's sitecustomize
# must run the one it hides (the test puts one on PYTHONPATH, which sets
# CHAINED) and change nothing else. It leaves 1 MiB of device memory through
# the CUDA runtime (ctypes) and hands gpuwatch_torch_blocks() bad input,
# printing what each call returned.
import ctypes
import os
import sys

print(f"chained {os.environ.get('GPUWATCH_TEST_CHAINED', '0')}")
print(f"torch_imported {int('torch' in sys.modules)}")
cudart = ctypes.CDLL("libcudart.so.13")
ptr = ctypes.c_void_p()
print(f"malloc {cudart.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(1 << 20))}")
api = ctypes.CDLL(None)
api.gpuwatch_torch_blocks.restype = ctypes.c_int
api.gpuwatch_torch_blocks.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
for name, text in [("not_json", b"{segments"), ("not_object", b"[]"), ("no_segments", b"{}"),
                   ("negative", b'{"segments": [{"reserved_bytes": -5}]}'),
                   ("null", None)]:
    print(f"refused_{name} {api.gpuwatch_torch_blocks(text, 0 if text is None else len(text))}")
print("torch_blocks_none: done", flush=True)
