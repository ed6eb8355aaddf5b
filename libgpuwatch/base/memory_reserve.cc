#include "libgpuwatch/base/memory_reserve.h"

#include <atomic>
#include <cstdlib>
#include <mutex>

#include "libgpuwatch/base/fork_locks.h"

namespace gpuwatch {

namespace {

std::mutex g_mu;  // guards g_chunks and g_count
void* g_chunks[MemoryReserve::kMaxChunks] = {};
int g_count = 0;
std::atomic<bool> g_ran_out{false};
std::atomic<bool> g_active{false};

// An allocation failed: give back one chunk and let operator new try again
// (it calls this again while it still fails); fail as operator new does
// once the reserve is spent.
void GiveBackAChunk() {
  void* chunk = nullptr;
  {
    const std::lock_guard<std::mutex> lock(g_mu);
    if (g_count > 0) chunk = g_chunks[--g_count];
  }
  g_ran_out.store(true);
  if (chunk == nullptr) throw std::bad_alloc();
  std::free(chunk);  // NOLINT(cppcoreguidelines-no-malloc)
}

void FreeChunks() {
  const std::lock_guard<std::mutex> lock(g_mu);
  while (g_count > 0) std::free(g_chunks[--g_count]);  // NOLINT(cppcoreguidelines-no-malloc)
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
    while (g_count < chunks) {
      void* chunk = std::malloc(chunk_bytes);  // NOLINT(cppcoreguidelines-no-malloc)
      if (chunk == nullptr) break;
      g_chunks[g_count++] = chunk;
    }
    held_ = g_count == chunks;
  }
  if (!held_) {
    FreeChunks();
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
