// The status page's writer side (status_page.h): making and publishing the
// page, claiming slots, and the background thread's writes.
#include "libgpuwatch/base/status_page.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>

#include "libgpuwatch/base/clock.h"

namespace gpuwatch {

std::atomic<StatusPage*> g_status_page{nullptr};
thread_local constinit StatusThread* t_status_slot __attribute__((tls_model("initial-exec"))) =
    nullptr;

template <size_t kWords>
void StatusText<kWords>::Store(const std::string& s) {
  char buf[kWords * 8] = {};  // zeros: the text ends within it
  s.copy(buf, sizeof(buf) - 1);
  for (size_t i = 0; i < kWords; ++i) {
    uint64_t w = 0;
    std::memcpy(&w, buf + i * 8, 8);
    words[i].store(w, std::memory_order_relaxed);
  }
}

template <size_t kWords>
std::string StatusText<kWords>::Load() const {
  char buf[kWords * 8 + 1] = {};
  for (size_t i = 0; i < kWords; ++i) {
    const uint64_t w = words[i].load(std::memory_order_relaxed);
    std::memcpy(buf + i * 8, &w, 8);
  }
  return std::string(buf, strnlen(buf, kWords * 8));
}

template struct StatusText<kStatusSiteWords>;
template struct StatusText<kStatusPathWords>;

namespace {

// The threads that found every slot taken write here, where no one reads.
StatusThread g_overflow_slot{};

// The name of this process's page, for RemoveStatusPageFile (no allocation
// at exit).
char g_page_path[512] = {};

pthread_key_t g_slot_key;
pthread_once_t g_slot_key_once = PTHREAD_ONCE_INIT;

// A thread that ends frees its slot for the next one.
void ReleaseSlot(void* p) {
  auto* s = static_cast<StatusThread*>(p);
  const uint32_t q = s->seq.load(std::memory_order_relaxed);
  s->seq.store(q + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  s->call.store(0, std::memory_order_relaxed);
  s->last_call.store(0, std::memory_order_relaxed);
  s->calls.store(0, std::memory_order_relaxed);
  s->seq.store(q + 2, std::memory_order_release);
  s->tid.store(0, std::memory_order_release);
}

std::atomic<bool> g_slot_key_made{false};

void MakeSlotKey() {
  if (pthread_key_create(&g_slot_key, ReleaseSlot) == 0) g_slot_key_made.store(true);
}

}  // namespace

StatusThread* ClaimStatusSlot() {
  StatusPage* page = g_status_page.load(std::memory_order_acquire);
  if (page == nullptr) return nullptr;
  const auto tid = static_cast<int32_t>(syscall(SYS_gettid));
  for (StatusThread& s : page->threads) {
    int32_t free = 0;
    if (s.tid.load(std::memory_order_relaxed) == 0 &&
        s.tid.compare_exchange_strong(free, tid, std::memory_order_acq_rel)) {
      pthread_once(&g_slot_key_once, MakeSlotKey);
      if (g_slot_key_made.load()) pthread_setspecific(g_slot_key, &s);
      t_status_slot = &s;
      return &s;
    }
  }
  page->process.threads_without_slot.fetch_add(1, std::memory_order_relaxed);
  t_status_slot = &g_overflow_slot;
  return &g_overflow_slot;
}

namespace {

// All of `bytes` at `offset`; false with errno set when they could not be.
bool WriteAt(int fd, const char* data, size_t bytes, size_t offset) {
  while (bytes > 0) {
    const ssize_t n = pwrite(fd, data, bytes, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      return false;
    }
    data += n;
    bytes -= static_cast<size_t>(n);
    offset += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

std::string StatusPagePath(const std::string& dir, pid_t pid) {
  return dir + "/" + std::to_string(pid) + ".status";
}

bool OpenStatusPage(const std::string& path, const std::vector<const char*>& call_names,
                    std::string* problem) {
  if (path.size() >= sizeof(g_page_path)) {
    *problem = "the status page's path is too long";
    return false;
  }
  // A file size limit below the page's would end the process (SIGXFSZ) at
  // the page's ftruncate.
  if (rlimit limit{}; getrlimit(RLIMIT_FSIZE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY &&
                      limit.rlim_cur < sizeof(StatusPage)) {
    *problem = "the file size limit (ulimit -f) is below the page's " +
               std::to_string(sizeof(StatusPage)) + " bytes";
    return false;
  }
  const std::string temporary = path + ".new";
  const int fd = open(temporary.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    *problem = "cannot make " + temporary + ": " + std::strerror(errno);
    return false;
  }
  // The names are written through the file, not the mapping: the first
  // write to each page of a shared mapping of a file is a page fault in
  // which the file system reserves the page's blocks and updates the file's
  // times (on ext4, a journal transaction each), which one write does once
  // for all of them. The mapping's other pages are written as the process
  // runs.
  const size_t names = std::min<size_t>(call_names.size(), kStatusCallNames);
  std::string block(names * kStatusNameBytes, '\0');
  for (size_t i = 0; i < names; ++i) {
    char* out = &block[i * kStatusNameBytes];
    // snprintf's "%s" cut, without its formatting (a tenth of attach's
    // instructions for the ~200 names).
    const size_t length = strnlen(call_names[i], kStatusNameBytes - 1);
    std::memcpy(out, call_names[i], length);
    // "cudaMemcpy_v3020" is "cudaMemcpy" to the user.
    if (char* v = std::strrchr(out, '_');
        v != nullptr && v[1] == 'v' && v[2] >= '0' && v[2] <= '9') {
      *v = '\0';
    }
  }
  void* map = MAP_FAILED;
  if (ftruncate(fd, sizeof(StatusPage)) == 0 &&
      WriteAt(fd, block.data(), block.size(), offsetof(StatusPage, names))) {
    map = mmap(nullptr, sizeof(StatusPage), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  const int error = errno;
  close(fd);
  if (map == MAP_FAILED) {
    *problem = "cannot map " + temporary + ": " + std::strerror(error);
    unlink(temporary.c_str());
    return false;
  }
  auto* page = static_cast<StatusPage*>(map);
  page->pid = static_cast<int32_t>(getpid());
  page->parent_pid = static_cast<int32_t>(getppid());
  page->size = sizeof(StatusPage);
  page->thread_slots = kStatusThreadSlots;
  page->call_names = static_cast<uint32_t>(std::min<size_t>(call_names.size(), kStatusCallNames));
  page->started_ticks = Ticks();
  page->started_ns = MonotonicNs();
  page->ticks_are_ns = kTicksAreNs ? 1 : 0;
  page->version = kStatusVersion;
  page->magic = kStatusMagic;
  if (rename(temporary.c_str(), path.c_str()) != 0) {
    *problem = "cannot name " + path + ": " + std::strerror(errno);
    unlink(temporary.c_str());
    munmap(map, sizeof(StatusPage));
    return false;
  }
  std::memcpy(g_page_path, path.c_str(), path.size() + 1);
  g_status_page.store(page, std::memory_order_release);
  return true;
}

void DetachStatusPage() {
  StatusPage* page = g_status_page.exchange(nullptr, std::memory_order_acq_rel);
  g_page_path[0] = '\0';  // the parent's name: the parent removes it
  t_status_slot = nullptr;
  if (g_slot_key_made.load()) pthread_setspecific(g_slot_key, nullptr);  // no release at its end
  if (page == nullptr) return;
  // The child's only thread forgot its slot above: nothing writes there.
  munmap(page, sizeof(StatusPage));
}

void RemoveStatusPageFile() {
  if (g_page_path[0] != '\0') unlink(g_page_path);
  g_page_path[0] = '\0';
}

void StatusUpdateProcess(const uint64_t* device_bytes, int devices, uint64_t checkpoint_ns,
                         const std::string& checkpoint_path) {
  StatusPage* page = g_status_page.load(std::memory_order_acquire);
  if (page == nullptr) return;
  StatusProcess& p = page->process;
  const uint32_t q = p.seq.load(std::memory_order_relaxed);
  p.seq.store(q + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  for (int d = 0; d < kStatusDevices; ++d) {
    p.device_bytes[d].store(d < devices ? device_bytes[d] : 0, std::memory_order_relaxed);
  }
  p.checkpoint_ns.store(checkpoint_ns, std::memory_order_relaxed);
  if (checkpoint_ns != 0) p.checkpoint_path.Store(checkpoint_path);
  p.updated_ticks.store(Ticks(), std::memory_order_relaxed);
  p.updated_ns.store(MonotonicNs(), std::memory_order_relaxed);
  p.seq.store(q + 2, std::memory_order_release);
}

std::vector<StatusSiteRequest> StatusSitesToResolve() {
  std::vector<StatusSiteRequest> out;
  StatusPage* page = g_status_page.load(std::memory_order_acquire);
  if (page == nullptr) return out;
  for (int i = 0; i < kStatusThreadSlots; ++i) {
    const StatusThread& s = page->threads[i];
    if (s.tid.load(std::memory_order_relaxed) == 0) continue;
    // A torn read names a stack to resolve at worst; the next tick corrects it.
    const uint32_t stack = s.stack_id.load(std::memory_order_relaxed);
    if (s.call.load(std::memory_order_relaxed) == 0 || stack == 0) continue;
    if (s.site_stack_id.load(std::memory_order_relaxed) == stack) continue;
    out.push_back({i, stack});
  }
  return out;
}

void StatusWriteSite(int slot, uint32_t stack_id, const std::string& site) {
  StatusPage* page = g_status_page.load(std::memory_order_acquire);
  if (page == nullptr || slot < 0 || slot >= kStatusThreadSlots) return;
  StatusThread& s = page->threads[slot];
  const uint32_t q = s.site_seq.load(std::memory_order_relaxed);
  s.site_seq.store(q + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  s.site.Store(site);
  s.site_stack_id.store(stack_id, std::memory_order_relaxed);
  s.site_seq.store(q + 2, std::memory_order_release);
}

}  // namespace gpuwatch
