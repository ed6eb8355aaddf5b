#include "libgpuwatch/base/own_stack.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>

// The main thread's initial stack pointer, set by the dynamic loader
// (exported by ld.so, declared in no header).
extern "C" void* __libc_stack_end;  // NOLINT(bugprone-reserved-identifier)

namespace gpuwatch {

namespace {

void* RunWork(void* arg) {
  (*static_cast<const std::function<void()>*>(arg))();
  return nullptr;
}

// Linux 6.11's PROCMAP_QUERY (include/uapi/linux/fs.h; Debian 12's headers
// predate it): the mapping that holds an address, or the next one, from one
// ioctl on /proc/self/maps, without formatting the file.
struct ProcmapQuery {
  uint64_t size;
  uint64_t query_flags;
  uint64_t query_addr;
  uint64_t vma_start;
  uint64_t vma_end;
  uint64_t vma_flags;
  uint64_t vma_page_size;
  uint64_t vma_offset;
  uint64_t inode;
  uint32_t dev_major;
  uint32_t dev_minor;
  uint32_t vma_name_size;
  uint32_t build_id_size;
  uint64_t vma_name_addr;
  uint64_t build_id_addr;
};
static_assert(sizeof(ProcmapQuery) == 104);
constexpr unsigned long kProcmapQuery = _IOWR('f', 17, ProcmapQuery);
constexpr uint64_t kCoveringOrNextVma = 0x10;

// The mapping that holds `addr` (or, with kCoveringOrNextVma, the first one
// above it): false when there is none or the kernel cannot say.
bool QueryMapping(int fd, uintptr_t addr, uint64_t flags, uintptr_t* start, uintptr_t* end) {
  ProcmapQuery q{};
  q.size = sizeof(q);
  q.query_flags = flags;
  q.query_addr = addr;
  if (ioctl(fd, kProcmapQuery, &q) != 0) return false;
  *start = q.vma_start;
  *end = q.vma_end;
  return true;
}

// Whether the main thread has `needed` bytes of stack below `sp`, as
// pthread_getattr_np's bounds would say (the stack mapping's end less
// RLIMIT_STACK, cut at the mapping below), from two PROCMAP_QUERY ioctls.
// For the main thread glibc reads and parses all of /proc/self/maps, which
// is most of what a tiny process's exit report spends before its work (and
// milliseconds with PyTorch's thousands of mappings). -1: the kernel cannot
// answer this way.
int MainThreadHasRoom(uintptr_t sp, size_t needed) {
  if (sp < needed) return 0;
  const int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  uintptr_t stack_start = 0;
  uintptr_t stack_end = 0;
  uintptr_t next_start = 0;
  uintptr_t next_end = 0;
  const uintptr_t deepest = sp - needed;
  const bool known = QueryMapping(fd, sp, 0, &stack_start, &stack_end) &&
                     QueryMapping(fd, deepest, kCoveringOrNextVma, &next_start, &next_end);
  close(fd);
  // Only the mapping glibc takes for the main thread's stack, the one that
  // holds __libc_stack_end: not a signal's alternate stack, nor a thread's
  // in a child forked from it.
  const auto libc_stack_end = reinterpret_cast<uintptr_t>(__libc_stack_end);
  if (!known || libc_stack_end < stack_start || libc_stack_end >= stack_end) return -1;
  // Another mapping between the deepest byte and the stack's mapping.
  if (next_start != stack_start) return 0;
  rlimit limit{};
  if (getrlimit(RLIMIT_STACK, &limit) != 0) return -1;
  return limit.rlim_cur == RLIM_INFINITY || stack_end - deepest <= limit.rlim_cur ? 1 : 0;
}

}  // namespace

bool SetWorkStack(pthread_attr_t* attr) {
  return pthread_attr_setstacksize(attr, kWorkStackBytes) == 0;
}

size_t StackLeft() {
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return SIZE_MAX;
  void* low = nullptr;
  size_t size = 0;
  const int rc = pthread_attr_getstack(&attr, &low, &size);
  pthread_attr_destroy(&attr);
  if (rc != 0 || low == nullptr) return SIZE_MAX;
  const char here = 0;
  const auto sp = reinterpret_cast<uintptr_t>(&here);
  const auto bottom = reinterpret_cast<uintptr_t>(low);
  return sp > bottom ? sp - bottom : 0;
}

bool StackHasRoom(size_t needed) {
  if (getpid() == gettid()) {
    const char here = 0;
    const int room = MainThreadHasRoom(reinterpret_cast<uintptr_t>(&here), needed);
    if (room >= 0) return room == 1;
  }
  return StackLeft() >= needed;
}

bool RunWithStack(const std::function<void()>& work, size_t needed) {
  if (StackHasRoom(needed)) {
    work();
    return true;
  }
  pthread_attr_t attr;
  if (pthread_attr_init(&attr) != 0) return false;
  // The host's signals keep going to its own threads.
  sigset_t all;
  sigset_t old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_t thread;
  const bool started =
      SetWorkStack(&attr) &&
      pthread_create(&thread, &attr, RunWork, const_cast<std::function<void()>*>(&work)) == 0;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  pthread_attr_destroy(&attr);
  if (started) pthread_join(thread, nullptr);
  return started;
}

}  // namespace gpuwatch
