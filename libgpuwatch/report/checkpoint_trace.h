// What a checkpoint reuses of its last checkpoint's trace events (issue 33:
// a checkpoint's cost in proportion to what changed; docs/BENCHMARKS.md,
// stop 50). The ring's events do not change once recorded, and an event's
// line names its site by the kept resolver's canonical id (not by its row in
// `trace.sites`), so the line an event got in the last checkpoint is its
// line now, as long as that resolver still gives each site the same
// canonical id and the kernel names and phase paths the lines index keep
// their rows. No text is kept in memory: the last checkpoint's file is (its
// path and identity: device, inode, size, modification time), with where
// each whole block of the ring's events lies in it; the lines of the blocks
// both checkpoints hold whole are read back with one pread and copied in by
// offsets. A file that is not as it was written (truncated, written to, its
// name given to another file or removed) is not read: every line is made.
// No descriptor is kept between checkpoints: the file is opened for the
// read and closed.
// The bytes are those of a checkpoint made from scratch either way.
#ifndef GPUWATCH_LIBGPUWATCH_REPORT_CHECKPOINT_TRACE_H_
#define GPUWATCH_LIBGPUWATCH_REPORT_CHECKPOINT_TRACE_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gpuwatch {

struct ReportTrace;
struct TraceSnapshot;

class CheckpointTrace {
 public:
  // Events per block: a block is reused whole or not at all.
  static constexpr uint64_t kBlockEvents = 1024;

  CheckpointTrace() = default;
  ~CheckpointTrace();
  CheckpointTrace(const CheckpointTrace&) = delete;
  CheckpointTrace& operator=(const CheckpointTrace&) = delete;

  // Before a checkpoint's events are written: `trace`, the report's trace
  // section, made from `snap` with the resolver `resolver` (its serial())
  // after `recanonicalized` changes of canonical ids
  // (SiteResolver::recanonicalized). Reads back the lines it can reuse.
  void Begin(const TraceSnapshot& snap, const ReportTrace& trace, uint64_t resolver,
             uint64_t recanonicalized);
  // TraceEventLines::reuse for DumpReport.
  size_t Lines(size_t i, uint64_t at, std::string* out);
  // The checkpoint was written to `path` (the file `fd` reads: its identity
  // is noted and `fd` closed), or, with fd -1, was not: nothing is reused
  // next time.
  void Written(int fd, const std::string& path);

  // Begin was called for the checkpoint being made.
  bool begun() const { return begun_; }
  // Events whose lines were copied from the last checkpoint (for tests).
  uint64_t reused() const { return reused_; }

 private:
  struct Block {
    uint64_t block = 0;  // its events are block * kBlockEvents onwards
    uint64_t at = 0;     // its first line's offset in the file
    uint64_t size = 0;   // its lines' bytes, the separators between them included
  };
  // A whole block of this checkpoint's events: the index of its first.
  struct Whole {
    uint64_t block = 0;
    size_t first = 0;
    const Block* kept = nullptr;  // in kept_, when its lines are reused
  };
  // The last checkpoint's file opened for reading, when it is still the
  // file as written; -1 otherwise.
  int OpenAsWritten() const;

  // The last checkpoint's file (its identity) and what it holds.
  bool written_ = false;
  std::string path_;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  off_t size_ = 0;
  int64_t mtime_ns_ = 0;
  std::vector<Block> kept_;  // by block
  uint64_t resolver_ = 0;
  uint64_t recanonicalized_ = 0;
  std::vector<std::string> names_;   // the kernel names and phase paths its
  std::vector<std::string> phases_;  // lines index

  // The checkpoint being made.
  std::vector<Whole> whole_;
  size_t next_ = 0;         // in whole_
  size_t open_ = SIZE_MAX;  // the block whose lines are being made
  uint64_t open_at_ = 0;
  std::vector<Block> made_;
  // The kept blocks' lines, read back (not zeroed first: ~1 MB each checkpoint).
  std::unique_ptr<char[]> read_;
  uint64_t read_at_ = 0;  // read_'s offset in the file
  uint64_t made_resolver_ = 0;
  uint64_t made_recanonicalized_ = 0;
  std::vector<std::string> made_names_;
  std::vector<std::string> made_phases_;
  uint64_t reused_ = 0;
  bool begun_ = false;
};

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_REPORT_CHECKPOINT_TRACE_H_
