// Report files: written atomically, and the one field written in place
// after the fact (the exit report's teardown time). Used by the library's report writers and by the
// `gpuwatch` command.
#ifndef GPUWATCH_LIBGPUWATCH_REPORT_FILE_H_
#define GPUWATCH_LIBGPUWATCH_REPORT_FILE_H_

#include <cstddef>
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

// The exit report's lifecycle.teardown_ns is measured after the report is
// on disk (the CUDA runtime's teardown runs later). So that adding it costs
// no second write of the report (reading it back, parsing and rewriting it
// took most of the exit of a big process), the exit report is written with
// the field's null widened to a slot of kTeardownSlotWidth bytes (`null`
// right-aligned in spaces: whitespace JSON allows), and SetReportTeardown
// writes the number into that slot, in place.
inline constexpr size_t kTeardownSlotWidth = 20;  // the digits of UINT64_MAX

// Widens lifecycle.teardown_ns's null in `text`, a report as DumpReport
// writes it, to the slot. Returns the slot's offset in `text`, or
// std::string::npos when the report has no lifecycle.teardown_ns that is
// null (`text` is then unchanged).
size_t OpenTeardownSlot(std::string* text);

// Writes `teardown_ns` into the slot at byte `slot` of the report at `path`
// (OpenTeardownSlot's offset in the text written there), right-aligned, and
// flushes it. The slot must still be empty: a file replaced or changed since
// is left alone, with a one-line reason in `error`. Used once, from the
// library's exit handlers, after CUDA's teardown.
bool SetReportTeardown(const std::string& path, size_t slot, uint64_t teardown_ns,
                       std::string* error);

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_REPORT_FILE_H_
