#include "libgpuwatch/report/checkpoint_trace.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <utility>

#include "libgpuwatch/record/trace.h"
#include "libgpuwatch/report/report_model.h"
#include "libgpuwatch/report/report_schema.h"

namespace gpuwatch {

namespace {

// The rows the last checkpoint's lines index are rows of `now` still.
bool BeginsWith(const std::vector<std::string>& now, const std::vector<std::string>& last) {
  return last.size() <= now.size() && std::equal(last.begin(), last.end(), now.begin());
}

int64_t MtimeNs(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

// Reads `size` bytes at `at` into `out`: false unless all of them were there.
bool ReadAt(int fd, uint64_t at, size_t size, char* out) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = pread(fd, out + done, size - done, static_cast<off_t>(at + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

CheckpointTrace::~CheckpointTrace() = default;

int CheckpointTrace::OpenAsWritten() const {
  if (!written_) return -1;
  // The file as it was written, and still the one its path names: one
  // truncated, written to or touched since, or replaced or removed, is not
  // read. Opened here, for this checkpoint's one read, not kept open from
  // the last: between checkpoints gpuwatch holds no descriptor of the
  // host's for it (docs/reliability.md).
  const int fd = open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return -1;
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_dev != dev_ || st.st_ino != ino_ ||
      st.st_size != size_ || MtimeNs(st) != mtime_ns_) {
    close(fd);
    return -1;
  }
  return fd;
}

void CheckpointTrace::Begin(const TraceSnapshot& snap, const ReportTrace& trace, uint64_t resolver,
                            uint64_t recanonicalized) {
  whole_.clear();
  made_.clear();
  next_ = 0;
  open_ = SIZE_MAX;
  reused_ = 0;
  begun_ = true;
  made_resolver_ = resolver;
  made_recanonicalized_ = recanonicalized;
  made_names_ = trace.names;
  made_phases_ = trace.phases;
  // The blocks whose every event is in the snapshot, and where their first
  // is among the report's events (ReportTraceOf makes one of each
  // snapshot's event: never a slot the ring left empty).
  if (trace.events.size() != snap.events.size() ||
      snap.first + snap.events.size() + snap.skipped.size() != snap.recorded) {
    return;
  }
  size_t skipped = 0;  // of snap.skipped, before the block
  for (uint64_t b = (snap.first + kBlockEvents - 1) / kBlockEvents;
       (b + 1) * kBlockEvents <= snap.recorded; ++b) {
    const uint64_t from = b * kBlockEvents;
    while (skipped < snap.skipped.size() && snap.skipped[skipped] < from) ++skipped;
    if (skipped < snap.skipped.size() && snap.skipped[skipped] < from + kBlockEvents) continue;
    whole_.push_back({b, static_cast<size_t>(from - snap.first - skipped), nullptr});
  }
  // Which of them the last checkpoint wrote whole, when its lines read as
  // this checkpoint's would.
  if (kept_.empty() || resolver != resolver_ || recanonicalized != recanonicalized_ ||
      !BeginsWith(trace.names, names_) || !BeginsWith(trace.phases, phases_)) {
    return;
  }
  uint64_t from = UINT64_MAX;
  uint64_t to = 0;
  auto k = kept_.begin();
  for (Whole& w : whole_) {
    k = std::lower_bound(k, kept_.end(), w.block,
                         [](const Block& x, uint64_t b) { return x.block < b; });
    if (k == kept_.end()) break;
    if (k->block != w.block) continue;
    w.kept = &*k;
    from = std::min(from, k->at);
    to = std::max(to, k->at + k->size);
  }
  if (from >= to) return;
  // One read of the lines reused (transient: freed once the report is
  // written); a block whose text is not a list of events' lines is not
  // copied (the file's size and time said it was ours: never expected).
  const auto forget = [this] {
    for (Whole& w : whole_) w.kept = nullptr;
    read_.reset();
  };
  const int fd = OpenAsWritten();
  if (fd < 0) return forget();
  read_ = std::make_unique_for_overwrite<char[]>(static_cast<size_t>(to - from));
  const bool read = ReadAt(fd, from, static_cast<size_t>(to - from), read_.get());
  close(fd);
  if (!read) return forget();
  read_at_ = from;
  for (const Whole& w : whole_) {
    if (w.kept == nullptr) continue;
    const size_t at = static_cast<size_t>(w.kept->at - from);
    if (w.kept->size < 2 || read_[at] != '[' || read_[at + w.kept->size - 1] != ']') {
      return forget();
    }
  }
}

size_t CheckpointTrace::Lines(size_t i, uint64_t at, std::string* out) {
  if (i == 0) {  // DumpReport writing the events (again)
    made_.clear();
    next_ = 0;
    open_ = SIZE_MAX;
    reused_ = 0;
  }
  // A block whose lines were made ends before event i's separator, or here
  // after the last event (`out` null).
  if (open_ != SIZE_MAX && i == whole_[open_].first + kBlockEvents) {
    const uint64_t end = out != nullptr ? at - kTraceEventSeparator.size() : at;
    made_.push_back({whole_[open_].block, open_at_, end - open_at_});
    open_ = SIZE_MAX;
  }
  if (out == nullptr || next_ >= whole_.size() || whole_[next_].first != i) return 0;
  const Whole& w = whole_[next_++];
  if (w.kept != nullptr) {
    out->append(read_.get() + (w.kept->at - read_at_), static_cast<size_t>(w.kept->size));
    made_.push_back({w.block, at, w.kept->size});
    reused_ += kBlockEvents;
    return kBlockEvents;
  }
  open_ = next_ - 1;
  open_at_ = at;
  return 0;
}

void CheckpointTrace::Written(int fd, const std::string& path) {
  written_ = false;
  kept_.clear();
  read_.reset();
  decltype(whole_)().swap(whole_);
  if (!std::exchange(begun_, false) && fd >= 0) {  // no trace in this checkpoint
    close(fd);
    fd = -1;
  }
  struct stat st {};
  if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
    close(fd);
    fd = -1;
  }
  if (fd < 0) {
    decltype(made_)().swap(made_);
    return;
  }
  close(fd);  // its identity is kept, not the descriptor: OpenAsWritten
  written_ = true;
  path_ = path;
  dev_ = st.st_dev;
  ino_ = st.st_ino;
  size_ = st.st_size;
  mtime_ns_ = MtimeNs(st);
  kept_.swap(made_);
  decltype(made_)().swap(made_);
  resolver_ = made_resolver_;
  recanonicalized_ = made_recanonicalized_;
  names_ = std::move(made_names_);
  phases_ = std::move(made_phases_);
}

}  // namespace gpuwatch
