import sys

_recording = False
_segments = []


def _record_memory_history(enabled="all", context="all", stacks="all", max_entries=0):
    global _recording
    _recording = enabled is not None


def _add(address, size):
    frames = []
    if _recording:
        f = sys._getframe(2)  # the caller of torch.cuda.empty
        while f is not None:
            frames.append({"filename": f.f_code.co_filename, "line": f.f_lineno,
                           "name": f.f_code.co_name})
            f = f.f_back
    _segments.append({"device": 0, "address": address, "total_size": size, "allocated_size": size,
                      "active_size": size, "requested_size": size, "segment_type": "large",
                      "blocks": [{"address": address, "size": size, "requested_size": size,
                                  "state": "active_allocated", "frames": frames}]})


def _snapshot():
    return {"segments": [dict(s) for s in _segments]}
