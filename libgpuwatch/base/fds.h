// Descriptors gpuwatch opens inside the host stay out of 0, 1 and 2.
//
// A daemon may start with stdin, stdout and stderr closed; the next open()
// or pipe() then returns one of them, and the host's printf would write into
// gpuwatch's pipe (bytes the background thread would read as requests) or
// into a report being written, and the host's own output would be lost.
// Every descriptor gpuwatch makes goes through these: moved to the lowest
// free descriptor >= 3, close-on-exec.
//
// Thread-safety: any thread; async-signal-safe (fcntl and close only).
#ifndef GPUWATCH_LIBGPUWATCH_BASE_FDS_H_
#define GPUWATCH_LIBGPUWATCH_BASE_FDS_H_

namespace gpuwatch {

// `fd` when it is -1 or above 2; else a close-on-exec duplicate at 3 or
// above, with `fd` closed (so 0-2 stay free, as the host left them). -1, with
// `fd` closed, when no such duplicate can be made.
int AboveStdio(int fd);

// pipe2(fds, flags), both ends above 2 (AboveStdio). False, with nothing
// left open, when it fails.
bool PipeAboveStdio(int fds[2], int flags);  // NOLINT(*-avoid-c-arrays): as pipe2

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_BASE_FDS_H_
