// Report files: written atomically, and the one field written in place
// after the fact (the exit report's teardown time). Used by the library's report writers and by the
// `gpuwatch` command.
#ifndef GPUWATCH_LIBGPUWATCH_REPORT_FILE_H_
#define GPUWATCH_LIBGPUWATCH_REPORT_FILE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace gpuwatch {

// How a file written atomically reaches the disk before it replaces `path`.
enum class Durability {
  // fsync before the rename: the new file survives a machine crash right
  // after the rename. For checkpoints, written off the application's path
  // (the background thread), and for the command's own files.
  kWaitForDisk,
  // sync_file_range(SYNC_FILE_RANGE_WRITE): the writeback starts and
  // nothing waits for it. For the reports written while the process ends
  // (exit, signal): the end of a process, a SIGKILL included, loses nothing
  // (the page cache has the data); a machine crash within seconds of it may
  // lose this file, not the one it replaced. An fsync costs milliseconds
  // on a slow disk, on the host's exit path.
  kStartWriteback,
};

// A file written atomically, in pieces: a temporary file in the same
// directory (O_EXCL, mode 0600) that Commit flushes (`durability`) and
// renames over `path`. For a report streamed as it is made (the trace
// section) without its whole text in memory. Not thread-safe; one thread
// from Open to the end.
class AtomicFile {
 public:
  AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  // A file not committed is removed.
  ~AtomicFile();

  // Creates the temporary file beside `path`. False with `error` set when
  // it cannot be made. A `path` that is a character device or a pipe
  // (/dev/null, /dev/stdout, a FIFO) is opened and written in place instead:
  // renaming over it would replace the device node.
  bool Open(const std::string& path, std::string* error);
  // True when Open() took `path` as a device or a pipe, written in place:
  // nothing can be written into it afterwards (the exit report's teardown slot).
  bool in_place() const { return in_place_; }
  // Appends `data`. After a failed write the rest are ignored and Commit
  // fails with its reason.
  void Write(std::string_view data);
  // Flushes the file (`durability`) and renames it over the path. False with
  // `error` set on any failure (a write's included): the path is then left
  // as it was.
  bool Commit(Durability durability, std::string* error);
  // Set before Open: the file is written through a descriptor that reads
  // too, and a Commit that renames it keeps a descriptor of it, which
  // ReleaseReader hands over (-1: none): the report as written, whatever
  // becomes of its name (a checkpoint notes the file's identity from it, to
  // read its trace back next time: checkpoint_trace.h).
  void KeepReader() { keep_reader_ = true; }
  int ReleaseReader() { return std::exchange(reader_, -1); }

 private:
  class Guards;  // the file size signal blocked; the file in flight, for a fatal signal
  std::unique_ptr<Guards> guards_;
  int fd_ = -1;
  std::string path_;
  std::string tmp_;
  std::string failed_;  // the first failure's reason
  bool in_place_ = false;
  bool keep_reader_ = false;
  int reader_ = -1;
};

// Writes `contents` to `path` atomically (an AtomicFile). On failure returns
// false and sets `error` to a one-line reason; `path` is then left as it was.
bool WriteFileAtomically(const std::string& path, const std::string& contents, std::string* error,
                         Durability durability = Durability::kWaitForDisk);

// Removes the temporary file an AtomicFile in progress has made, for
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
// starts its writeback, as the exit report's (kStartWriteback). The slot must still be empty: a
// file replaced or changed since is left alone, with a one-line reason in `error`. Used once, from
// the library's exit handlers, after CUDA's teardown.
bool SetReportTeardown(const std::string& path, size_t slot, uint64_t teardown_ns,
                       std::string* error);

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_REPORT_FILE_H_
