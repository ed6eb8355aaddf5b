"""gpuwatch from Python: talk to the gpuwatch profiler when it is attached.

gpuwatch attaches to a process without code changes (`gpuwatch run -- python
train.py`, or LD_PRELOAD=libgpuwatch.so). This module lets the script mark
training steps for growth detection, write a report now, and leave setup
work out of the record:

    import gpuwatch

    for step, batch in enumerate(loader):
        train_step(batch)
        gpuwatch.mark("step")          # growth suspects: bytes per step

    with gpuwatch.paused():            # not recorded
        warm_up_caches()

    with gpuwatch.phase("forward"):    # the report's memory by phase
        loss = model(batch)

    gpuwatch.snapshot("after epoch")   # <output>.snapshot-N now

Every function is a cheap no-op when gpuwatch is not attached (it returns
False or None), so a script runs unchanged without it. The C API is looked
up in the process itself, never loaded from here: with `gpuwatch run` or
LD_PRELOAD the library is already there, and with CUDA_INJECTION64_PATH it is
there once the CUDA driver has started. Pure Python (ctypes), standard
library only; `gpuwatch run` puts this package on PYTHONPATH.

gpuwatch.pytest_plugin is a pytest plugin built on point() and live_since():
`python -m pytest --gpuwatch --gpuwatch-max-leak=0` under gpuwatch fails the
test that leaves device memory live (docs/testing.md).
"""

import collections
import contextlib
import ctypes
import json
import os
import threading

__version__ = "0.1.0"  # the version of libgpuwatch this package comes with

__all__ = ["attached", "loaded", "recording", "not_recording", "version", "mark", "snapshot", "pause", "resume", "paused", "phase", "live",
           "Live", "point", "live_since"]

# Memory live now: bytes and number of allocations (live()).
Live = collections.namedtuple("Live", ["bytes", "count"])

_lock = threading.Lock()
_api = None  # the C API once found: gpuwatch does not unload
# Called before each snapshot(): torch_blocks.start() sets it so that the
# report has PyTorch's blocks of that moment.
_before_snapshot = None


def _bind(lib):
    lib.gpuwatch_version.restype = ctypes.c_char_p
    lib.gpuwatch_version.argtypes = []
    lib.gpuwatch_is_active.restype = ctypes.c_int
    lib.gpuwatch_is_active.argtypes = []
    for name in ("gpuwatch_mark", "gpuwatch_snapshot"):
        getattr(lib, name).restype = ctypes.c_int
        getattr(lib, name).argtypes = [ctypes.c_char_p]
    for name in ("gpuwatch_pause", "gpuwatch_resume"):
        getattr(lib, name).restype = ctypes.c_int
        getattr(lib, name).argtypes = []
    if hasattr(lib, "gpuwatch_live"):  # a library built before it has no such call
        lib.gpuwatch_live.restype = ctypes.c_int
        lib.gpuwatch_live.argtypes = [ctypes.c_char_p, ctypes.c_int,
                                      ctypes.POINTER(ctypes.c_uint64),
                                      ctypes.POINTER(ctypes.c_uint64)]
    if hasattr(lib, "gpuwatch_phase_push"):
        lib.gpuwatch_phase_push.restype = ctypes.c_int
        lib.gpuwatch_phase_push.argtypes = [ctypes.c_char_p]
        lib.gpuwatch_phase_pop.restype = ctypes.c_int
        lib.gpuwatch_phase_pop.argtypes = []
    if hasattr(lib, "gpuwatch_not_recording"):
        lib.gpuwatch_not_recording.restype = ctypes.c_int
        lib.gpuwatch_not_recording.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    if hasattr(lib, "gpuwatch_point"):
        lib.gpuwatch_point.restype = ctypes.c_uint64
        lib.gpuwatch_point.argtypes = []
        lib.gpuwatch_live_since.restype = ctypes.c_long
        lib.gpuwatch_live_since.argtypes = [ctypes.c_uint64, ctypes.c_char_p, ctypes.c_size_t]
    return lib


def _find():
    """The C API when libgpuwatch.so is loaded in this process, else None."""
    global _api
    if _api is not None:
        return _api
    candidates = [None]  # the process's own symbols: LD_PRELOAD, gpuwatch run
    injected = os.environ.get("CUDA_INJECTION64_PATH")
    if injected:
        candidates.append(injected)  # loaded by the CUDA driver, if it has started
    for name in candidates:
        try:
            if name is None:
                lib = ctypes.CDLL(None)
            else:  # only when already loaded: never load gpuwatch from here
                lib = ctypes.CDLL(name, mode=os.RTLD_NOLOAD | os.RTLD_NOW)
        except OSError:
            continue
        if hasattr(lib, "gpuwatch_is_active"):
            with _lock:
                if _api is None:
                    _api = _bind(lib)
            return _api
    return None


def _text(label):
    if label is None:
        return None
    return label.encode("utf-8", "replace") if isinstance(label, str) else bytes(label)


def attached():
    """True when gpuwatch is loaded in this process and recording."""
    api = _find()
    return api is not None and api.gpuwatch_is_active() == 1


def loaded():
    """True when gpuwatch is loaded in this process, recording or not."""
    return _find() is not None


def recording():
    """True when gpuwatch records this process (the same as attached())."""
    return attached()


def not_recording():
    """Why gpuwatch, loaded in this process, does not record it: CUPTI held
    by another tool (Nsight Systems, ...), no usable driver, GPUWATCH_DISABLE=1,
    or CUPTI detached under it. None while it records, before the process's
    first CUDA call, and when it is not loaded. A gate must not pass what was
    not recorded."""
    api = _find()
    if api is None or not hasattr(api, "gpuwatch_not_recording"):
        return None
    why = ctypes.create_string_buffer(512)
    if api.gpuwatch_not_recording(why, len(why)) != 1:
        return None
    return why.value.decode("utf-8", "replace")


def version():
    """gpuwatch's version ("MAJOR.MINOR.PATCH") when it is loaded, else None."""
    api = _find()
    return api.gpuwatch_version().decode() if api is not None else None


def mark(label=None):
    """Marks a step or phase boundary for growth detection: the report lists
    the sites whose live device memory rises from mark to mark. Cheap enough
    for every training step. True when gpuwatch recorded it."""
    api = _find()
    return api is not None and api.gpuwatch_mark(_text(label)) == 0


def snapshot(label=None):
    """Writes a report now (<output>.snapshot-N, `label` in it). True when it
    was written."""
    api = _find()
    if api is not None and _before_snapshot is not None:
        _before_snapshot("snapshot")
    return api is not None and api.gpuwatch_snapshot(_text(label)) == 0


def pause():
    """Stops recording new allocations, copies and launches (frees are still
    recorded). Not nested: one resume() ends any number of pauses. Before
    gpuwatch attaches (the first CUDA call) the pause holds from the attach
    on. True when gpuwatch is loaded and not disabled."""
    api = _find()
    return api is not None and api.gpuwatch_pause() == 0


def resume():
    """Records again after pause(). True when gpuwatch is loaded and not
    disabled."""
    api = _find()
    return api is not None and api.gpuwatch_resume() == 0


def live(kind=None, device=-1):
    """Memory live now, as gpuwatch recorded it: Live(bytes, count) of `kind`
    ("device", "pool", "managed", "vmm", "array", "graph", "pinned_host",
    "registered_host", "vmm_imported", "ipc_imported"; "host" for both host kinds; None for
    every device kind) on `device` (an ordinal; -1 for every device). None when gpuwatch
    is not attached; ValueError for an unknown kind."""
    api = _find()
    if api is None or not hasattr(api, "gpuwatch_live"):
        return None
    nbytes, count = ctypes.c_uint64(), ctypes.c_uint64()
    if api.gpuwatch_live(_text(kind), int(device), ctypes.byref(nbytes), ctypes.byref(count)) != 0:
        if api.gpuwatch_is_active() == 1:
            raise ValueError("gpuwatch.live: unknown memory kind %r" % (kind,))
        return None
    return Live(nbytes.value, count.value)


def point():
    """A point in the program's allocations: live_since(point) later says what
    was allocated after it and is still live (a test's leak). Also starts the
    window whose device peak live_since() reports. Before the first CUDA call
    it is the start: everything gpuwatch will record is after it. None
    without gpuwatch."""
    api = _find()
    if api is None or not hasattr(api, "gpuwatch_point"):
        return None
    handle = api.gpuwatch_point()
    return handle if handle != 0 else None


def live_since(since):
    """What was allocated after the point `since` and is still live: a dict
    {"device": LEAKS, "host": LEAKS, "window_peak_bytes": N}, each LEAKS a
    leaks section as gpuwatch's reports write it (bytes, count, leaked_bytes
    after categories and suppressions, and the sites, largest first, with
    location, frames, category and suppression). None without gpuwatch or
    without a point."""
    api = _find()
    if api is None or since is None or not hasattr(api, "gpuwatch_live_since"):
        return None
    size = 1 << 16
    while True:
        buffer = ctypes.create_string_buffer(size)
        n = api.gpuwatch_live_since(since, buffer, size)
        if n < 0:
            return None
        if n < size:
            return json.loads(buffer.value.decode("utf-8", "replace"))
        size = n + 1


@contextlib.contextmanager
def paused():
    """`with gpuwatch.paused():` leaves the block's allocations, copies and
    launches out of the record, and resumes recording after it (also when it
    raises). Pauses do not nest: the end of an inner block resumes."""
    pause()
    try:
        yield
    finally:
        resume()


@contextlib.contextmanager
def phase(name):
    """`with gpuwatch.phase("forward"):` (or `@gpuwatch.phase("forward")` on a
    function) opens a phase on this thread for the block: its allocations,
    copies and launches are reported under the path of the phases open
    ("step/forward"), with the peak of device memory while it was open (the
    report's "phases" section). The same stack as NVTX's range_push/pop
    (torch.cuda.nvtx), which gpuwatch also takes. Closed when the block
    raises too; a no-op without gpuwatch."""
    api = _find()
    pushed = api is not None and hasattr(api, "gpuwatch_phase_push") and \
        api.gpuwatch_phase_push(_text(name) or b"") == 0
    try:
        yield
    finally:
        if pushed:
            api.gpuwatch_phase_pop()
