// Memory set aside while gpuwatch builds a report inside the host.
//
// A report is built in memory; when the host is near its memory limit
// (RLIMIT_AS, strict overcommit), an allocation fails partway. Throwing
// std::bad_alloc from there is not safe: nlohmann::json's destructors
// allocate (they flatten nested values onto a heap stack), so a failure
// inside one, or while unwinding through one, is std::terminate, which would
// end the host. While a MemoryReserve lives, a new-handler of gpuwatch's own
// (libgpuwatch.so links its own libstdc++, so the host's handler is not
// touched) answers a failed allocation by giving back one reserved chunk and
// letting the allocation try again, and marks the report as out of memory;
// the builder gives up at its next safe point (ThrowIfOutOfMemory, between
// sections, never inside a destructor) and unwinds on what is left of the
// reserve. Only when every chunk is gone does an allocation throw.
//
// Thread-safety: one MemoryReserve at a time (reports are written under the
// report lock); the handler itself may run on any thread.
#ifndef GPUWATCH_LIBGPUWATCH_BASE_MEMORY_RESERVE_H_
#define GPUWATCH_LIBGPUWATCH_BASE_MEMORY_RESERVE_H_

#include <cstddef>
#include <new>

namespace gpuwatch {

// Whether `bytes` could be allocated now (malloc'd and freed at once; never
// touched, so it costs address space for a moment, not memory).
bool CanAllocate(size_t bytes);

// Throws std::bad_alloc when an allocation failed since the MemoryReserve
// was made (a chunk was given back for it). Call it where unwinding is safe.
void ThrowIfOutOfMemory();

class MemoryReserve {
 public:
  static constexpr int kMaxChunks = 32;
  // `chunks` (at most kMaxChunks) chunks of `chunk_bytes`.
  MemoryReserve(int chunks, size_t chunk_bytes);
  ~MemoryReserve();
  MemoryReserve(const MemoryReserve&) = delete;
  MemoryReserve& operator=(const MemoryReserve&) = delete;

  // False when the chunks could not be set aside: too little memory to try.
  bool held() const { return held_; }

 private:
  bool held_ = false;
  std::new_handler previous_ = nullptr;
};

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_BASE_MEMORY_RESERVE_H_
