#include "libgpuwatch/base/arena.h"

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <mutex>
#include <utility>

#include "libgpuwatch/base/log.h"

namespace gpuwatch {

namespace {

constexpr size_t kPageBytes = 4096;

size_t WholePages(size_t bytes) { return (bytes + kPageBytes - 1) / kPageBytes * kPageBytes; }

// A chunk is filled front to back and used entirely, so its pages are faulted
// in by the mmap itself: a page fault costs several microseconds in a VM and
// would land on an allocating thread, often inside a CUDA callback.
void* MapChunk(size_t bytes) {
  void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  return mem == MAP_FAILED ? nullptr : mem;
}

}  // namespace

void* MapZeroed(size_t bytes) {
  void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return mem == MAP_FAILED ? nullptr : mem;
}

void Unmap(void* mem, size_t bytes) {
  if (mem != nullptr) munmap(mem, bytes);
}

void* MapSlots(uint32_t max_entries, size_t slot_size, size_t* mask, size_t* bytes) {
  const size_t num_slots = std::bit_ceil(std::max<size_t>(size_t{2} * max_entries, 16));
  *mask = num_slots - 1;
  return MapSlotArray(num_slots, slot_size, bytes);
}

void* MapSlotArray(size_t num_slots, size_t slot_size, size_t* bytes) {
  *bytes = num_slots * slot_size;
  void* slots = MapZeroed(*bytes);
  // Slots are probed at random: huge pages (where THP is in madvise mode)
  // spare a TLB miss per lookup once the table is large. Advisory only.
  if (slots != nullptr && *bytes >= (size_t{2} << 20)) madvise(slots, *bytes, MADV_HUGEPAGE);
  return slots;
}

RecordArena::RecordArena(uint32_t max_records, size_t max_bytes, size_t chunk_bytes,
                         const char* what)
    : max_records_(std::min<uint32_t>(max_records, UINT32_MAX - 1)), what_(what) {
  if (max_records_ == 0 || max_bytes == 0 || chunk_bytes == 0) {
    full_.store(true, std::memory_order_relaxed);
    return;
  }
  chunk_bytes_ = WholePages(std::min(chunk_bytes, max_bytes));
  first_chunk_bytes_ = std::min(kFirstChunkBytes, chunk_bytes_);
  const size_t whole_chunks =
      std::min<size_t>((max_bytes + chunk_bytes_ - 1) / chunk_bytes_, UINT32_MAX / 2);
  max_bytes_ = whole_chunks * chunk_bytes_;
  // The growing chunks before the first whole one, then whole chunks: at
  // most one more than that many, since the growing ones sum to less than a
  // whole chunk.
  size_t growing = 0;
  while ((first_chunk_bytes_ << growing) < chunk_bytes_) ++growing;
  max_chunks_ = whole_chunks + growing;
  by_id_bytes_ = (size_t{max_records_} + 1) * sizeof(void*);
  chunks_bytes_ = max_chunks_ * sizeof(char*);
  by_id_ = static_cast<const void**>(MapZeroed(by_id_bytes_));
  chunks_ = static_cast<char**>(MapZeroed(chunks_bytes_));
  if (by_id_ == nullptr || chunks_ == nullptr) {
    Warn("cannot map %zu bytes for %s; they will not be recorded", by_id_bytes_ + chunks_bytes_,
         what_);
    Unmap(by_id_, by_id_bytes_);
    Unmap(chunks_, chunks_bytes_);
    by_id_ = nullptr;
    chunks_ = nullptr;
    full_.store(true, std::memory_order_relaxed);
  }
}

RecordArena::~RecordArena() {
  if (chunks_ != nullptr) {
    for (size_t i = 0; i < num_chunks_; ++i) Unmap(chunks_[i], ChunkBytes(i));
  }
  Unmap(spare_, ChunkBytes(num_chunks_));
  Unmap(by_id_, by_id_bytes_);
  Unmap(chunks_, chunks_bytes_);
}

size_t RecordArena::ChunkBytes(size_t index) const {
  // Doubling from the first size up to the whole chunk; the last one stops
  // at max_bytes_, so the arena holds as much as whole chunks did.
  size_t start = 0;
  size_t i = 0;
  for (; i < index && (first_chunk_bytes_ << i) < chunk_bytes_; ++i)
    start += first_chunk_bytes_ << i;
  if (i < index) start += (index - i) * chunk_bytes_;
  const size_t size = i == index && (first_chunk_bytes_ << i) < chunk_bytes_
                          ? first_chunk_bytes_ << i
                          : chunk_bytes_;
  return start >= max_bytes_ ? 0 : std::min(size, max_bytes_ - start);
}

bool RecordArena::RoomForNextChunk() const {
  return num_chunks_ < max_chunks_ && ChunkBytes(num_chunks_) != 0;
}

void RecordArena::AddChunk(char* chunk) {
  last_chunk_bytes_ = ChunkBytes(num_chunks_);
  chunks_[num_chunks_++] = chunk;
  chunk_offset_ = 0;
}

void* RecordArena::Allocate(size_t bytes, uint32_t* id) {
  bytes = (bytes + 7) & ~size_t{7};  // records stay 8-byte aligned
  std::lock_guard<Mutex> lock(mu_);
  if (full_.load(std::memory_order_relaxed)) return nullptr;
  const uint32_t next = next_id_.load(std::memory_order_relaxed);
  if (next > max_records_ || bytes > chunk_bytes_) {
    // A record larger than a chunk is refused alone; a full id range ends it all.
    if (next > max_records_) full_.store(true, std::memory_order_relaxed);
    return nullptr;
  }
  if (num_chunks_ == 0 || chunk_offset_ + bytes > last_chunk_bytes_) {
    // The tail of the previous chunk is wasted: records are small against
    // chunks. A record larger than the next growing chunk waits for a chunk
    // that holds it (records are a few hundred bytes; chunks 64 KiB and up).
    while (true) {
      if (!RoomForNextChunk()) {
        full_.store(true, std::memory_order_relaxed);
        return nullptr;
      }
      char* chunk = std::exchange(spare_, nullptr);
      if (chunk == nullptr) {
        // Prepare() did not map it ahead (a table that grew faster than
        // gpuwatch's thread runs, or no such thread): mapped here, as every
        // chunk was before chunks grew.
        chunk = static_cast<char*>(MapChunk(ChunkBytes(num_chunks_)));
        if (chunk == nullptr) {
          Warn("cannot map %zu bytes for %s; new ones will not be recorded",
               ChunkBytes(num_chunks_), what_);
          full_.store(true, std::memory_order_relaxed);
          return nullptr;
        }
        bytes_mapped_.fetch_add(ChunkBytes(num_chunks_), std::memory_order_relaxed);
      }
      AddChunk(chunk);
      if (bytes <= last_chunk_bytes_) break;
    }
  }
  void* record = chunks_[num_chunks_ - 1] + chunk_offset_;
  chunk_offset_ += static_cast<uint32_t>(bytes);
  bytes_used_.fetch_add(bytes, std::memory_order_relaxed);
  next_id_.store(next + 1, std::memory_order_release);
  *id = next;
  return record;
}

void RecordArena::Publish(uint32_t id, const void* record) {
  std::atomic_ref<const void*>(by_id_[id]).store(record, std::memory_order_release);
}

const void* RecordArena::Get(uint32_t id) const {
  if (id == 0 || id > max_records_ || by_id_ == nullptr) return nullptr;
  return std::atomic_ref<const void*>(by_id_[id]).load(std::memory_order_acquire);
}

void RecordArena::Prepare() {
  size_t bytes = 0;
  uint32_t index = 0;
  {
    std::lock_guard<Mutex> lock(mu_);
    if (preparing_ || spare_ != nullptr || full_.load(std::memory_order_relaxed) ||
        !RoomForNextChunk()) {
      return;
    }
    // The first chunk at once; a next one once the last is half used.
    if (num_chunks_ != 0 && chunk_offset_ < last_chunk_bytes_ / 2) return;
    index = num_chunks_;
    bytes = ChunkBytes(index);
    preparing_ = true;
  }
  void* chunk = MapChunk(bytes);  // outside the lock: faulting 1 MiB in takes a millisecond
  std::lock_guard<Mutex> lock(mu_);
  preparing_ = false;
  if (chunk == nullptr) return;  // Allocate() tries again, and warns
  if (num_chunks_ != index) {
    // An allocation took a chunk of its own meanwhile: this one is the wrong size.
    Unmap(chunk, bytes);
    return;
  }
  bytes_mapped_.fetch_add(bytes, std::memory_order_relaxed);
  if (index == 0) {
    AddChunk(static_cast<char*>(chunk));  // what the first Allocate() would map
  } else {
    spare_ = static_cast<char*>(chunk);
  }
}

}  // namespace gpuwatch
