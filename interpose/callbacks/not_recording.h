// Whether gpuwatch records this process, and when it does not, why. The
// per-test gates, `gpuwatch run` and the Python API ask, so that none of them
// vouches for a process gpuwatch did not record (CUPTI held by Nsight, no
// driver, CUPTI detached by another client).
#ifndef GPUWATCH_INTERPOSE_CALLBACKS_NOT_RECORDING_H_
#define GPUWATCH_INTERPOSE_CALLBACKS_NOT_RECORDING_H_

#include <cstddef>
#include <string>

namespace gpuwatch {

// Notes that gpuwatch is not recording, for `why` (the first reason is
// kept), and tells `gpuwatch run` through its log ("off<TAB>WHY<TAB>PID")
// when `run_log` is set. The caller says it on stderr.
void MarkNotRecording(const std::string& why, const std::string& run_log);

// Appends "KIND<TAB>TEXT<TAB>PID" to `gpuwatch run`'s log (GPUWATCH_RUN_LOG):
// a report written ("exit", "checkpoint", ...), "cuda" (the first CUDA call),
// "start" (a process image began: a new process, or an exec), "off". Tabs and
// newlines in `text` become spaces. Nothing when `run_log` is empty.
void AppendRunLog(const std::string& run_log, const char* kind, const std::string& text);

// Copies the reason, NUL-terminated and cut to `size`, into `why` (may be
// null); false while nothing has been marked. Async-signal-safe.
bool NotRecordingReason(char* why, size_t size);

}  // namespace gpuwatch

#endif  // GPUWATCH_INTERPOSE_CALLBACKS_NOT_RECORDING_H_
