"""PyTorch's caching-allocator blocks in gpuwatch's report (--torch-blocks).

Under PyTorch's default caching allocator gpuwatch sees the segments PyTorch
reserves with cudaMalloc, not the tensors inside them. install() asks
PyTorch itself for that view: once torch's CUDA initializes, it turns on
torch.cuda.memory._record_memory_history(enabled="state", stacks="python")
(the allocator keeps the Python frames of each live block, no event trace),
and at the moments Python sees (atexit, which runs before gpuwatch's exit
report; gpuwatch.snapshot()) it takes torch.cuda.memory._snapshot(), reduces
it to segments and blocks (address, sizes, state, Python frames) and hands it
to gpuwatch_torch_blocks() (include/gpuwatch/gpuwatch.h), which puts it into
the next report's `torch_blocks` section (docs/report-format.md).

torch_hooks.py calls start() once torch's CUDA is up, under `gpuwatch run
--torch-blocks` (from its sitecustomize.py, torch_shim/); a script run
otherwise may call install() itself, and the pytest plugin's
--gpuwatch-torch-blocks does. At torch.cuda.OutOfMemoryError torch_hooks
hands a snapshot over too (moment "oom"). Whatever fails costs one line on
stderr and PyTorch's blocks, never the program.
"""

import atexit
import json
import os
import sys

_started = False
_torch = None


def _warn(what):
    sys.stderr.write(f"gpuwatch: --torch-blocks: {what}; the report has no PyTorch blocks\n")


def _frame_text(f):
    return f"{f.get('filename', '?')}:{f.get('line', 0)}:{f.get('name', '?')}"


def _location(frames, torch_dir):
    """The block's Python line: its innermost frame outside torch itself."""
    for f in frames:
        if not str(f.get("filename", "")).startswith(torch_dir):
            return f"{os.path.basename(str(f.get('filename', '?')))}:{f.get('line', 0)}"
    if frames:
        f = frames[0]
        return f"{os.path.basename(str(f.get('filename', '?')))}:{f.get('line', 0)}"
    return ""


def reduce(snapshot, moment, torch_dir="", max_frames=16):
    """torch.cuda.memory._snapshot()'s answer as gpuwatch_torch_blocks()
    takes it (docs/report-format.md, "torch_blocks")."""
    segments = []
    for seg in snapshot.get("segments", []):
        blocks = []
        for b in seg.get("blocks", []):
            frames = b.get("frames") or []
            block = {"address": hex(int(b["address"])), "size": int(b["size"]),
                     "requested_size": int(b.get("requested_size", 0)),
                     "state": str(b.get("state", ""))}
            if b.get("state") != "inactive" and frames:
                block["frames"] = [_frame_text(f) for f in frames[:max_frames]]
                block["location"] = _location(frames, torch_dir)
            blocks.append(block)
        segments.append({"address": hex(int(seg["address"])), "device": int(seg.get("device", 0)),
                         "pool": str(seg.get("segment_type", "")),
                         "reserved_bytes": int(seg["total_size"]),
                         "allocated_bytes": int(seg.get("allocated_size", 0)),
                         "requested_bytes": int(seg.get("requested_size", 0)),
                         "active_bytes": int(seg.get("active_size", 0)),
                         "blocks": blocks})
    segments.sort(key=lambda s: int(s["address"], 16))
    return {"moment": moment, "segments": segments}


def hand_over(moment="snapshot"):
    """Takes PyTorch's snapshot now and hands it to gpuwatch for its next
    report. True when gpuwatch kept it; False when recording has not started
    (no CUDA yet), gpuwatch is not loaded, or it failed (one line says why)."""
    if not _started:
        return False
    try:
        import gpuwatch
        api = gpuwatch._find()
        if api is None or not hasattr(api, "gpuwatch_torch_blocks"):
            return False
        if not getattr(api, "_torch_blocks_bound", False):
            import ctypes
            api.gpuwatch_torch_blocks.restype = ctypes.c_int
            api.gpuwatch_torch_blocks.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
            api._torch_blocks_bound = True
        torch_dir = os.path.dirname(_torch.__file__) + os.sep
        doc = reduce(_torch.cuda.memory._snapshot(), moment, torch_dir)
        text = json.dumps(doc, separators=(",", ":")).encode()
        return api.gpuwatch_torch_blocks(text, len(text)) == 0
    except Exception as e:  # noqa: BLE001 - never the program's failure
        _warn(f"could not hand PyTorch's snapshot over ({type(e).__name__}: {e})")
        return False


def start():
    """Turns PyTorch's memory history on; torch_hooks calls it once torch's
    CUDA is up. True when on."""
    global _started, _torch
    try:
        import torch
        _torch = torch
        torch.cuda.memory._record_memory_history(enabled="state", context="alloc",
                                                 stacks="python")
        _started = True
        atexit.register(_at_exit)  # after torch's own: runs before them
        import gpuwatch
        gpuwatch._before_snapshot = hand_over
    except Exception as e:  # noqa: BLE001 - an exception here would fail CUDA's init
        _warn(f"could not start PyTorch's memory history ({type(e).__name__}: {e})")
    return _started


def _at_exit():
    hand_over("exit")


def install():
    """Hands PyTorch's blocks to gpuwatch from now on (see the module's
    text). Idempotent; does nothing visible in a program that never imports
    torch."""
    from gpuwatch import torch_hooks
    torch_hooks.install(blocks=True)
