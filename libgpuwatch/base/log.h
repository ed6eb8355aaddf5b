// One-line diagnostics from inside the host process.
//
// gpuwatch never throws and never aborts the host: when something fails it
// prints one line prefixed "gpuwatch: " on stderr and carries on without the
// feature. Lines are written with a single write(2) so that they do not
// interleave with the host's output mid-line.
#ifndef GPUWATCH_LIBGPUWATCH_BASE_LOG_H_
#define GPUWATCH_LIBGPUWATCH_BASE_LOG_H_

namespace gpuwatch {

// printf-style; formats into a stack buffer (truncated at 1 KiB) and writes
// "gpuwatch: <text>\n" to stderr. Thread-safe. Not async-signal-safe (uses
// vsnprintf). Never allocates.
void Warn(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// Writes `text` verbatim to stderr with one write(2). Async-signal-safe.
void WriteStderr(const char* text);

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_BASE_LOG_H_
