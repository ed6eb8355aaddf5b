// Writing report files: atomically (AtomicFile, WriteFileAtomically), and the one
// field written in place afterwards (OpenTeardownSlot, SetReportTeardown).
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <string_view>
#include <utility>

#include "libgpuwatch/base/fds.h"
#include "libgpuwatch/report/file.h"

namespace gpuwatch {

namespace {

std::string DirName(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// Under a file size limit (`ulimit -f`) a write past it raises SIGXFSZ, whose
// default action ends the process; so does SIGPIPE, for a report written to a
// pipe whose reader has gone. While a report is written both are blocked on
// this thread, and one a failed write raised is discarded: the write fails
// (EFBIG, EPIPE), which costs the report, not the host.
class FileSizeSignalGuard {
 public:
  FileSizeSignalGuard() {
    sigemptyset(&xfsz_);
    sigaddset(&xfsz_, SIGXFSZ);
    sigaddset(&xfsz_, SIGPIPE);
    blocked_ = pthread_sigmask(SIG_BLOCK, &xfsz_, &old_) == 0;
  }
  ~FileSizeSignalGuard() {
    if (!blocked_) return;
    sigset_t pending;
    for (const int sig : {SIGXFSZ, SIGPIPE}) {
      if (sigismember(&old_, sig) == 0 && sigpending(&pending) == 0 &&
          sigismember(&pending, sig) == 1) {
        sigset_t one;
        sigemptyset(&one);
        sigaddset(&one, sig);
        const timespec now{};
        sigtimedwait(&one, nullptr, &now);
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  FileSizeSignalGuard(const FileSizeSignalGuard&) = delete;
  FileSizeSignalGuard& operator=(const FileSizeSignalGuard&) = delete;

 private:
  sigset_t xfsz_{};
  sigset_t old_{};
  bool blocked_ = false;
};

// The temporary file a write has made and not yet renamed or removed, for a
// signal that ends the process midway (RemoveFileInFlight). One at a time:
// a second concurrent write is not registered.
std::atomic<bool> g_in_flight_claimed{false};
std::atomic<bool> g_in_flight{false};
char g_in_flight_path[4096];

class InFlight {
 public:
  explicit InFlight(const std::string& tmp) {
    if (tmp.empty() || tmp.size() >= sizeof(g_in_flight_path) || g_in_flight_claimed.exchange(true))
      return;
    std::memcpy(g_in_flight_path, tmp.c_str(), tmp.size() + 1);
    g_in_flight.store(true);
    mine_ = true;
  }
  ~InFlight() {
    if (!mine_) return;
    g_in_flight.store(false);
    g_in_flight_claimed.store(false);
  }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

 private:
  bool mine_ = false;
};

}  // namespace

void RemoveFileInFlight() {
  if (g_in_flight.load()) unlink(g_in_flight_path);
}

// Both held from Open to the end of the file's write.
class AtomicFile::Guards {
 public:
  explicit Guards(const std::string& tmp) : in_flight_(tmp) {}

 private:
  const FileSizeSignalGuard no_sigxfsz_;
  const InFlight in_flight_;
};

AtomicFile::AtomicFile() = default;

AtomicFile::~AtomicFile() {
  if (reader_ >= 0) close(reader_);
  if (fd_ >= 0) {
    close(fd_);
    if (!in_place_) unlink(tmp_.c_str());
  }
}

namespace {

// A character device or a pipe (/dev/null, /dev/stdout, a FIFO) is written
// in place: a rename would replace the node itself (as root, /dev/null with
// a regular file). A symbolic link is followed only where the system keeps
// its own (/dev/stdout, /dev/fd/N): elsewhere it is replaced, not followed,
// as for a regular file.
bool WrittenInPlace(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return false;
  if (S_ISLNK(st.st_mode) && (path.rfind("/dev/", 0) != 0 || stat(path.c_str(), &st) != 0)) {
    return false;
  }
  return S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode);
}

}  // namespace

bool AtomicFile::Open(const std::string& path, std::string* error) {
  path_ = path;
  if (WrittenInPlace(path)) {
    in_place_ = true;
    guards_ = std::make_unique<Guards>(std::string());
    // Not blocking on a FIFO that no one reads (ENXIO then), which would
    // hang the process at its exit; writes block as to any pipe.
    fd_ = AboveStdio(open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
    if (fd_ < 0) {
      *error = "cannot open " + path + ": " + std::strerror(errno);
      guards_.reset();
      return false;
    }
    fcntl(fd_, F_SETFL, fcntl(fd_, F_GETFL) & ~O_NONBLOCK);
    return true;
  }
  std::random_device rd;
  char suffix[32];
  std::snprintf(suffix, sizeof(suffix), ".tmp.%08x%08x", rd(), rd());
  tmp_ = path + suffix;
  guards_ = std::make_unique<Guards>(tmp_);
  fd_ = AboveStdio(
      open(tmp_.c_str(),
           (keep_reader_ ? O_RDWR : O_WRONLY) | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (fd_ < 0) {
    *error = "cannot create a file in " + DirName(path) + ": " + std::strerror(errno);
    guards_.reset();
    return false;
  }
  return true;
}

void AtomicFile::Write(std::string_view data) {
  if (fd_ < 0 || !failed_.empty()) return;
  while (!data.empty()) {
    const ssize_t n = write(fd_, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      failed_ = "cannot write " + (in_place_ ? path_ : tmp_) + ": " + std::strerror(errno);
      return;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
}

bool AtomicFile::Commit(Durability durability, std::string* error) {
  if (fd_ < 0) {
    *error = "cannot write " + path_ + ": not open";
    return false;
  }
  if (failed_.empty() && !in_place_) {
    if (durability == Durability::kWaitForDisk) {
      if (fsync(fd_) != 0) failed_ = "cannot flush " + tmp_ + ": " + std::strerror(errno);
    } else {
      // Starts the writeback and returns. Its result is not checked: a
      // file system without it (EINVAL, ESPIPE) writes back on its own,
      // and a write error still shows at close, as an fsync's would.
      (void)sync_file_range(fd_, 0, 0, SYNC_FILE_RANGE_WRITE);
    }
  }
  const int fd = std::exchange(fd_, -1);
  if (keep_reader_ && failed_.empty() && !in_place_) reader_ = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  if (close(fd) != 0 && failed_.empty()) {
    failed_ = "cannot flush " + (in_place_ ? path_ : tmp_) + ": " + std::strerror(errno);
  }
  // rename() replaces a symlink placed at `path` rather than following it.
  if (failed_.empty() && !in_place_ && rename(tmp_.c_str(), path_.c_str()) != 0) {
    failed_ = "cannot rename " + tmp_ + " to " + path_ + ": " + std::strerror(errno);
  }
  if (!failed_.empty()) {
    if (!in_place_) unlink(tmp_.c_str());
    *error = failed_;
    if (reader_ >= 0) close(std::exchange(reader_, -1));
  }
  guards_.reset();
  return failed_.empty();
}

bool WriteFileAtomically(const std::string& path, const std::string& contents, std::string* error,
                         Durability durability) {
  AtomicFile file;
  if (!file.Open(path, error)) return false;
  file.Write(contents);
  return file.Commit(durability, error);
}

namespace {

// The empty slot: `null` right-aligned, as OpenTeardownSlot writes it.
std::string EmptyTeardownSlot() { return std::string(kTeardownSlotWidth - 4, ' ') + "null"; }

}  // namespace

size_t OpenTeardownSlot(std::string* text) {
  // DumpReport indents by 2: a top-level section opens at "\n  \"key\": {"
  // and closes at the first "\n  }" after it (deeper levels are indented
  // further; a newline inside a string is written as \n), and its members
  // start at "\n    \"key\": ".
  static constexpr std::string_view kOpen = "\n  \"lifecycle\": {";
  static constexpr std::string_view kClose = "\n  }";
  static constexpr std::string_view kNull = "\n    \"teardown_ns\": null";
  const size_t open = text->find(kOpen);
  if (open == std::string::npos) return std::string::npos;
  const size_t close = text->find(kClose, open + kOpen.size());
  const size_t at = text->find(kNull, open + kOpen.size());
  if (at == std::string::npos || at > close) return std::string::npos;
  const size_t value = at + kNull.size() - 4;  // where "null" starts
  text->insert(value, kTeardownSlotWidth - 4, ' ');
  return value;
}

bool SetReportTeardown(const std::string& path, size_t slot, uint64_t teardown_ns,
                       std::string* error) {
  const int fd = AboveStdio(open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW));
  if (fd < 0) {
    *error = "cannot open " + path + ": " + std::strerror(errno);
    return false;
  }
  const std::string empty = EmptyTeardownSlot();
  char was[kTeardownSlotWidth];
  const auto offset = static_cast<off_t>(slot);
  if (pread(fd, was, sizeof(was), offset) != static_cast<ssize_t>(sizeof(was)) ||
      std::string_view(was, sizeof(was)) != empty) {
    close(fd);
    *error = path + " is no longer the exit report gpuwatch wrote";
    return false;
  }
  char value[kTeardownSlotWidth + 1];
  std::snprintf(value, sizeof(value), "%*llu", static_cast<int>(kTeardownSlotWidth),
                static_cast<unsigned long long>(teardown_ns));
  const FileSizeSignalGuard no_sigxfsz;
  // Part of the exit report: its writeback is started, not waited for
  // (Durability::kStartWriteback).
  const bool ok =
      pwrite(fd, value, kTeardownSlotWidth, offset) == static_cast<ssize_t>(kTeardownSlotWidth);
  if (ok) (void)sync_file_range(fd, offset, kTeardownSlotWidth, SYNC_FILE_RANGE_WRITE);
  if (!ok) *error = "cannot write " + path + ": " + std::strerror(errno);
  if (close(fd) != 0 && ok) {
    *error = "cannot write " + path + ": " + std::strerror(errno);
    return false;
  }
  return ok;
}

}  // namespace gpuwatch
