"""What gpuwatch asks of PyTorch in a Python process, hooked in once torch is
imported and its CUDA is up:

- always, PyTorch's out-of-memory observer
  (torch._C._cuda_attach_out_of_memory_observer): when PyTorch raises
  torch.cuda.OutOfMemoryError it reads its own allocated and reserved bytes
  (torch.cuda.memory_stats()) and hands them to gpuwatch_torch_oom(), which
  adds them to the out-of-memory report that failure wrote (oom.torch,
  docs/report-format.md);
- with blocks=True (`gpuwatch run --torch-blocks`), PyTorch's blocks
  (torch_blocks.py), also taken at the out-of-memory moment.

`gpuwatch run` installs it from a sitecustomize.py (torch_shim/) in every
Python process it starts; a script run otherwise may call install() itself.
Whatever fails costs one line on stderr, never the program.
"""

import sys

_installed = False
_blocks = False
_observing = False
_torch = None


def _warn(what):
    sys.stderr.write(f"gpuwatch: PyTorch: {what}; carrying on without it\n")


def _api():
    """The C API with gpuwatch_torch_oom bound, or None."""
    import gpuwatch
    api = gpuwatch._find()
    if api is None or not hasattr(api, "gpuwatch_torch_oom"):
        return None
    if not getattr(api, "_torch_oom_bound", False):
        import ctypes
        api.gpuwatch_torch_oom.restype = ctypes.c_int
        api.gpuwatch_torch_oom.argtypes = [ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64]
        api._torch_oom_bound = True
    return api


def _on_oom(device, requested, device_total, device_free):
    """PyTorch's out-of-memory observer: runs when its allocator gives up,
    after it emptied its cache and retried, before the error is raised, on
    the thread whose allocation failed, with its allocator unlocked."""
    try:
        api = _api()
        if api is None:
            return
        if _blocks:
            from gpuwatch import torch_blocks
            torch_blocks.hand_over("oom")
        stats = _torch.cuda.memory_stats(device)
        api.gpuwatch_torch_oom(device, int(stats.get("allocated_bytes.all.current", 0)),
                               int(stats.get("reserved_bytes.all.current", 0)))
    except Exception as e:  # noqa: BLE001 - never the program's failure
        _warn(f"could not read its counters at the out-of-memory error ({type(e).__name__}: {e})")


def _start():
    """Runs at torch's CUDA initialization (torch.cuda._lazy_call)."""
    global _observing
    if _blocks:
        from gpuwatch import torch_blocks
        torch_blocks.start()
    if _observing:
        return
    try:
        _torch._C._cuda_attach_out_of_memory_observer(_on_oom)
        _observing = True
    except Exception as e:  # noqa: BLE001 - an exception here would fail CUDA's init
        _warn(f"could not observe its out-of-memory errors ({type(e).__name__}: {e})")


def _on_torch(torch):
    global _torch
    try:
        _torch = torch
        torch.cuda._lazy_call(_start)  # now when CUDA is up, else at its initialization
    except Exception as e:  # noqa: BLE001
        _warn(f"could not hook torch ({type(e).__name__}: {e})")


class _TorchFinder:
    """Finds torch for the import system like the finders after it, and
    calls _on_torch once torch's module has run."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        spec = None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find is not None else None
            if spec is not None:
                break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            _on_torch(module)

        spec.loader.exec_module = exec_module
        return spec


def install(blocks=False):
    """Hooks PyTorch (see the module's text): now if torch is imported, else
    when it is. Idempotent; a later call with blocks=True adds the blocks."""
    global _installed, _blocks
    upgrade = blocks and not _blocks
    _blocks = _blocks or blocks
    try:
        if _installed:
            if upgrade and _torch is not None:
                _on_torch(_torch)  # starts the history at once when CUDA is up
            return
        _installed = True
        if "torch" in sys.modules:
            _on_torch(sys.modules["torch"])
        else:
            sys.meta_path.insert(0, _TorchFinder())
    except Exception as e:  # noqa: BLE001
        _warn(f"could not install ({type(e).__name__}: {e})")
