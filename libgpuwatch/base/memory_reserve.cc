#include "libgpuwatch/base/memory_reserve.h"

#include <sys/mman.h>

#include <atomic>
#include <cstdlib>
#include <mutex>

#include "libgpuwatch/base/fork_locks.h"

namespace gpuwatch {

namespace {

// The reserve is one anonymous mapping of g_count chunks of g_chunk_bytes,
// given back from its end: one mmap instead of a malloc per chunk (16 brk
// calls and a page each for their headers, in a tiny process's exit report),
// and a chunk given back returns its address space and commit charge (what
// RLIMIT_AS and strict overcommit count) whatever size the failed allocation
// asks for next. Never touched: it costs no memory.
std::mutex g_mu;  // guards g_block, g_chunk_bytes and g_count
char* g_block = nullptr;
size_t g_chunk_bytes = 0;
int g_count = 0;
std::atomic<bool> g_ran_out{false};
std::atomic<bool> g_active{false};

// An allocation failed: give back one chunk and let operator new try again
// (it calls this again while it still fails); fail as operator new does
// once the reserve is spent.
void GiveBackAChunk() {
  bool gave = false;
  {
    const std::lock_guard<std::mutex> lock(g_mu);
    if (g_count > 0) {
      --g_count;
      munmap(g_block + static_cast<size_t>(g_count) * g_chunk_bytes, g_chunk_bytes);
      gave = true;
    }
  }
  g_ran_out.store(true);
  if (!gave) throw std::bad_alloc();
}

void FreeChunks() {
  const std::lock_guard<std::mutex> lock(g_mu);
  if (g_count > 0) munmap(g_block, static_cast<size_t>(g_count) * g_chunk_bytes);
  g_block = nullptr;
  g_count = 0;
}

}  // namespace

bool CanAllocate(size_t bytes) {
  void* probe = std::malloc(bytes);  // NOLINT(cppcoreguidelines-no-malloc): a probe
  std::free(probe);                  // NOLINT(cppcoreguidelines-no-malloc)
  return probe != nullptr;
}

void ThrowIfOutOfMemory() {
  if (g_active.load() && g_ran_out.load()) throw std::bad_alloc();
}

MemoryReserve::MemoryReserve(int chunks, size_t chunk_bytes) {
  static const bool kForkSafe = (fork_locks::AddLeaf(&g_mu, "the memory reserve"), true);
  (void)kForkSafe;
  if (chunks > kMaxChunks || g_active.exchange(true)) return;  // one at a time
  {
    const std::lock_guard<std::mutex> lock(g_mu);
    const size_t bytes = static_cast<size_t>(chunks) * chunk_bytes;
    void* block = bytes == 0 ? nullptr
                             : mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    held_ = block != MAP_FAILED;
    if (held_) {
      g_block = static_cast<char*>(block);
      g_chunk_bytes = chunk_bytes;
      g_count = bytes == 0 ? 0 : chunks;
    }
  }
  if (!held_) {
    g_active.store(false);
    return;
  }
  g_ran_out.store(false);
  previous_ = std::set_new_handler(GiveBackAChunk);
}

MemoryReserve::~MemoryReserve() {
  if (!held_) return;
  std::set_new_handler(previous_);
  FreeChunks();
  g_ran_out.store(false);
  g_active.store(false);
}

}  // namespace gpuwatch
