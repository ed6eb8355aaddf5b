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

// At most this many mappings between the stack's rlimit and its mapping are
// stepped over (MainThreadStack): past it, glibc's own parse.
constexpr int kMappingsBelow = 16;

}  // namespace

bool MainThreadStack(uintptr_t sp, StackBounds* bounds) {
  // Another thread's stack is never the main one's: two cheap system calls
  // instead of the ioctls, on each thread's first walk in a CUDA callback.
  if (getpid() != gettid()) return false;
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto libc_stack_end = reinterpret_cast<uintptr_t>(__libc_stack_end);
  rlimit limit{};
  if (libc_stack_end == 0 || getrlimit(RLIMIT_STACK, &limit) != 0) return false;
  const int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  uintptr_t start = 0;
  uintptr_t end = 0;
  bool known = QueryMapping(fd, libc_stack_end, 0, &start, &end);
  // glibc's arithmetic, unsigned as its: the top is the page above
  // __libc_stack_end, the size RLIMIT_STACK less what the mapping holds above
  // that top, in whole pages.
  const uintptr_t top = (libc_stack_end & -page) + page;
  uintptr_t size = (static_cast<uintptr_t>(limit.rlim_cur) - (end - top)) / page * page;
  // glibc cuts the size at the end of the mapping just below the stack's; only
  // one that ends above top - size can. An unlimited stack (size past the top)
  // would mean stepping up from address 0: glibc's parse is cheaper.
  known = known && size < top;
  uintptr_t below_end = 0;
  uintptr_t from = top - size;
  for (int i = 0; known; ++i) {
    uintptr_t next_start = 0;
    uintptr_t next_end = 0;
    known =
        i < kMappingsBelow && QueryMapping(fd, from, kCoveringOrNextVma, &next_start, &next_end);
    if (!known || next_start >= start) break;  // the stack's own mapping: none more below it
    below_end = next_end;
    from = next_end;
  }
  close(fd);
  if (!known) return false;
  if (below_end != 0 && size > top - below_end) size = top - below_end;
  // Only the stack that holds `sp`: not a signal's alternate stack, nor a
  // thread's in a child forked from it (glibc reads its descriptor there).
  if (sp < top - size || sp >= top) return false;
  bounds->lo = top - size;
  bounds->hi = top;
  return true;
}

namespace {

// glibc's bounds of the calling thread's stack (for the main thread, from
// its read of all of /proc/self/maps).
bool GlibcStack(StackBounds* bounds) {
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return false;
  void* low = nullptr;
  size_t size = 0;
  const int rc = pthread_attr_getstack(&attr, &low, &size);
  pthread_attr_destroy(&attr);
  if (rc != 0 || low == nullptr || size == 0) return false;
  bounds->lo = reinterpret_cast<uintptr_t>(low);
  bounds->hi = bounds->lo + size;
  return true;
}

// Bytes of `bounds`' stack below `sp`.
size_t Below(uintptr_t sp, const StackBounds& bounds) {
  return sp > bounds.lo ? sp - bounds.lo : 0;
}

}  // namespace

bool CallerStack(StackBounds* bounds) {
  const char here = 0;
  return MainThreadStack(reinterpret_cast<uintptr_t>(&here), bounds) || GlibcStack(bounds);
}

bool SetWorkStack(pthread_attr_t* attr) {
  return pthread_attr_setstacksize(attr, kWorkStackBytes) == 0;
}

size_t StackLeft() {
  const char here = 0;
  StackBounds bounds;
  return GlibcStack(&bounds) ? Below(reinterpret_cast<uintptr_t>(&here), bounds) : SIZE_MAX;
}

bool StackHasRoom(size_t needed) {
  const char here = 0;
  StackBounds bounds;
  return !CallerStack(&bounds) || Below(reinterpret_cast<uintptr_t>(&here), bounds) >= needed;
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
