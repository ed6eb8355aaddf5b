// Report files: written atomically, and the one field patched after the
// fact. Used by the library's report writers and by the `gpuwatch` command.
#ifndef GPUWATCH_LIBGPUWATCH_REPORT_FILE_H_
#define GPUWATCH_LIBGPUWATCH_REPORT_FILE_H_

#include <cstdint>
#include <string>

namespace gpuwatch {

// Writes `contents` to `path` atomically: a temporary file in the same
// directory (O_EXCL, mode 0600) that is fsync'ed and renamed over `path`. On
// failure returns false and sets `error` to a one-line reason; `path` is then
// left as it was.
bool WriteFileAtomically(const std::string& path, const std::string& contents, std::string* error);

// Removes the temporary file a WriteFileAtomically in progress has made, for
// a signal that ends the process before it is renamed (no `.tmp.` file is
// left beside the report). Async-signal-safe (unlink).
void RemoveFileInFlight();

// Sets lifecycle.teardown_ns in the report at `path` (read, update, atomic
// rewrite). Used once, from the library destructor, after CUDA's teardown.
bool SetReportTeardown(const std::string& path, uint64_t teardown_ns, std::string* error);

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_REPORT_FILE_H_
