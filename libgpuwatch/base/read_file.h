// Reading a whole file that someone else named (a suppressions file, a report
// handed to a tool), bounded: only a regular file, at most a given size, and
// never blocking (a FIFO or a device is refused before it is read).
//
// Thread-safety: any thread.
#ifndef GPUWATCH_LIBGPUWATCH_BASE_READ_FILE_H_
#define GPUWATCH_LIBGPUWATCH_BASE_READ_FILE_H_

#include <cstdint>
#include <string>

namespace gpuwatch {

// Reads `path` into *text. False with *error set to the reason, without the
// path ("a directory, not a file", "a FIFO, not a regular file", "2147483648
// bytes, over the limit of 1048576", "No such file or directory") when it is
// not a regular file, is larger than `max_bytes`, or cannot be read.
bool ReadRegularFile(const std::string& path, uint64_t max_bytes, std::string* text,
                     std::string* error);

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_BASE_READ_FILE_H_
