// A freed address handed to another thread's allocation at once, as a real
// driver does: 4 threads allocate 8 KiB blocks and pass them on; 2 threads
// free every block but each 8th, which stays live. The simulator reuses a
// freed block for the next allocation of its size, whatever the thread, so
// allocations often get an address whose cudaFree has not returned yet. At
// most kInFlight blocks wait to be freed: the allocators cannot run ahead
// of the freers however the threads are scheduled (a loaded machine), so
// freed addresses are always there to be reused.
#include <cuda_runtime.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace {

constexpr int kAllocators = 4;
constexpr int kFreers = 2;
constexpr int kPerAllocator = 500;  // 2,000 blocks; 250 kept
constexpr size_t kBlock = 8192;
constexpr size_t kInFlight = 8;

std::mutex g_mu;
std::condition_variable g_ready;
std::condition_variable g_space;
std::deque<std::pair<void*, int>> g_blocks;  // guarded by g_mu
int g_allocators_left = kAllocators;         // guarded by g_mu
std::set<void*> g_seen;                      // addresses handed out so far; guarded by g_mu
int g_reused = 0;                            // allocations at an address seen before

void Allocate(int thread) {
  for (int i = 0; i < kPerAllocator; ++i) {
    void* p = nullptr;
    if (cudaMalloc(&p, kBlock) != cudaSuccess) std::abort();  // LEAK:kept
    std::unique_lock<std::mutex> lock(g_mu);
    if (!g_seen.insert(p).second) ++g_reused;
    g_space.wait(lock, [] { return g_blocks.size() < kInFlight; });
    g_blocks.emplace_back(p, thread * kPerAllocator + i);
    g_ready.notify_one();
  }
  std::lock_guard<std::mutex> lock(g_mu);
  --g_allocators_left;
  g_ready.notify_all();
}

void Free() {
  for (;;) {
    std::pair<void*, int> block;
    {
      std::unique_lock<std::mutex> lock(g_mu);
      g_ready.wait(lock, [] { return !g_blocks.empty() || g_allocators_left == 0; });
      if (g_blocks.empty()) return;
      block = g_blocks.front();
      g_blocks.pop_front();
      g_space.notify_one();
    }
    if (block.second % 8 == 7) continue;  // every 8th block stays live
    if (cudaFree(block.first) != cudaSuccess) std::abort();
  }
}

}  // namespace

int main() {
  std::vector<std::thread> threads;
  for (int t = 0; t < kAllocators; ++t) threads.emplace_back(Allocate, t);
  for (int t = 0; t < kFreers; ++t) threads.emplace_back(Free);
  for (auto& t : threads) t.join();
  std::printf("reuse_race: done, %d allocations at a reused address\n", g_reused);
  return 0;
}
