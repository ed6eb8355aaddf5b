#include "libgpuwatch/stacks/stack_table.h"

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <new>

#include "libgpuwatch/base/log.h"

namespace gpuwatch {

namespace {

constexpr size_t kPageBytes = 4096;

// Anonymous zero-filled memory, backed by pages only when touched. nullptr on
// failure. MAP_NORESERVE: an index sized for the cap should not count against
// the commit limit before it is used.
void* MapZeroed(size_t bytes) {
  void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return mem == MAP_FAILED ? nullptr : mem;
}

// An arena chunk is filled front to back and will be used entirely, so its
// pages are faulted in by the mmap itself: one syscall instead of 256 page
// faults, each of which costs several microseconds in a VM and would land on
// an allocating thread.
void* MapChunk(size_t bytes) {
  void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  return mem == MAP_FAILED ? nullptr : mem;
}

void Unmap(void* mem, size_t bytes) {
  if (mem != nullptr) munmap(mem, bytes);
}

// Two independent multiply-rotate lanes (so the CPU overlaps them), then a
// murmur3 finaliser. Return addresses share their high bits, so the low bits
// must reach the whole word; the finaliser does that. Not cryptographic: a
// collision only costs a pc comparison.
inline uint64_t HashPcs(const uintptr_t* pcs, int n) {
  constexpr uint64_t kMulA = 0x9E3779B97F4A7C15ULL;
  constexpr uint64_t kMulB = 0xC2B2AE3D27D4EB4FULL;
  uint64_t a = static_cast<uint64_t>(n) * kMulA;
  uint64_t b = 0x2545F4914F6CDD1DULL;
  int i = 0;
  for (; i + 1 < n; i += 2) {
    a = std::rotl((a ^ pcs[i]) * kMulA, 29);
    b = std::rotl((b ^ pcs[i + 1]) * kMulB, 31);
  }
  if (i < n) a = std::rotl((a ^ pcs[i]) * kMulA, 29);
  uint64_t h = a ^ std::rotl(b, 17);
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDULL;
  h ^= h >> 33;
  h *= 0xC4CEB9FE1A85EC53ULL;
  h ^= h >> 33;
  return h;
}

inline std::atomic_ref<uint64_t> SlotRef(uint64_t* slots, size_t i) {
  return std::atomic_ref<uint64_t>(slots[i]);
}

}  // namespace

StackTable::StackTable(uint32_t max_stacks, size_t max_bytes)
    : max_stacks_(std::min<uint32_t>(max_stacks, UINT32_MAX - 1)) {
  static_assert(
      sizeof(std::mutex) + sizeof(next_id_) + sizeof(bytes_used_) + 2 * sizeof(uint32_t) <= 64,
      "the arena's hot fields should fit one cache line");
  if (max_stacks_ == 0 || max_bytes == 0) {
    full_.store(true, std::memory_order_relaxed);
    return;
  }
  // Load factor <= 1/2 keeps probe sequences short and guarantees an empty
  // slot for every insert, since ids are capped at max_stacks_.
  const size_t num_slots = std::bit_ceil(std::max<size_t>(size_t{2} * max_stacks_, 16));
  slot_mask_ = num_slots - 1;
  slots_bytes_ = num_slots * sizeof(uint64_t);
  by_id_bytes_ = (size_t{max_stacks_} + 1) * sizeof(void*);  // one record pointer per id
  chunk_bytes_ = std::min(kChunkBytes, (max_bytes + kPageBytes - 1) / kPageBytes * kPageBytes);
  max_chunks_ = std::min<size_t>((max_bytes + chunk_bytes_ - 1) / chunk_bytes_, UINT32_MAX);
  chunks_bytes_ = max_chunks_ * sizeof(char*);

  slots_ = static_cast<uint64_t*>(MapZeroed(slots_bytes_));
  // Slots are probed at random: huge pages (where THP is in madvise mode)
  // spare a TLB miss per lookup once the table is large. Advisory only.
  if (slots_ != nullptr && slots_bytes_ >= (size_t{2} << 20)) {
    madvise(slots_, slots_bytes_, MADV_HUGEPAGE);
  }
  by_id_ = static_cast<const Record**>(MapZeroed(by_id_bytes_));
  chunks_ = static_cast<char**>(MapZeroed(chunks_bytes_));
  if (slots_ == nullptr || by_id_ == nullptr || chunks_ == nullptr) {
    Warn("cannot map %zu bytes for the stack table; stacks will not be recorded",
         slots_bytes_ + by_id_bytes_ + chunks_bytes_);
    Unmap(slots_, slots_bytes_);
    Unmap(by_id_, by_id_bytes_);
    Unmap(chunks_, chunks_bytes_);
    slots_ = nullptr;
    by_id_ = nullptr;
    chunks_ = nullptr;
    full_.store(true, std::memory_order_relaxed);
  }
}

StackTable::~StackTable() {
  if (chunks_ != nullptr) {
    for (size_t i = 0; i < num_chunks_; ++i) Unmap(chunks_[i], chunk_bytes_);
  }
  Unmap(slots_, slots_bytes_);
  Unmap(by_id_, by_id_bytes_);
  Unmap(chunks_, chunks_bytes_);
}

uint32_t StackTable::Find(uint64_t hash, const uintptr_t* pcs, int n, size_t* empty_slot) const {
  const uint64_t tag = hash >> 32;
  const size_t bytes = static_cast<size_t>(n) * sizeof(uintptr_t);
  for (size_t i = hash & slot_mask_;; i = (i + 1) & slot_mask_) {
    // Acquire pairs with the inserter's release CAS: seeing the slot means
    // seeing its by_id_ entry and the record's contents.
    const uint64_t slot = SlotRef(slots_, i).load(std::memory_order_acquire);
    if (slot == 0) {
      *empty_slot = i;
      return 0;
    }
    if ((slot >> 32) != tag) continue;
    const auto id = static_cast<uint32_t>(slot);
    const Record* record =
        std::atomic_ref<const Record*>(by_id_[id]).load(std::memory_order_acquire);
    if (record->n == static_cast<uint32_t>(n) && std::memcmp(PcsOf(record), pcs, bytes) == 0) {
      return id;
    }
  }
}

StackTable::Record* StackTable::Allocate(int n, uint32_t* id) {
  const size_t bytes = sizeof(Record) + static_cast<size_t>(n) * sizeof(uintptr_t);
  std::lock_guard<Mutex> lock(arena_mu_);
  if (full_.load(std::memory_order_relaxed)) return nullptr;
  const uint32_t next = next_id_.load(std::memory_order_relaxed);
  if (next > max_stacks_) {
    full_.store(true, std::memory_order_relaxed);
    return nullptr;
  }
  if (num_chunks_ == 0 || chunk_offset_ + bytes > chunk_bytes_) {
    // The tail of the previous chunk is wasted; records are at most about
    // 2 KiB against 1 MiB chunks.
    if (num_chunks_ == max_chunks_ || bytes > chunk_bytes_) {
      full_.store(true, std::memory_order_relaxed);
      return nullptr;
    }
    void* chunk = MapChunk(chunk_bytes_);
    if (chunk == nullptr) {
      Warn("cannot map %zu bytes for stacks; new stacks will not be recorded", chunk_bytes_);
      full_.store(true, std::memory_order_relaxed);
      return nullptr;
    }
    chunks_[num_chunks_++] = static_cast<char*>(chunk);
    chunk_offset_ = 0;
  }
  auto* record = new (chunks_[num_chunks_ - 1] + chunk_offset_) Record{};
  chunk_offset_ += static_cast<uint32_t>(bytes);  // a multiple of 8: records stay aligned
  bytes_used_.fetch_add(bytes, std::memory_order_relaxed);
  next_id_.store(next + 1, std::memory_order_release);
  *id = next;
  return record;
}

void StackTable::Prepare() {
  std::lock_guard<Mutex> lock(arena_mu_);
  if (num_chunks_ != 0 || full_.load(std::memory_order_relaxed) || max_chunks_ == 0) return;
  void* chunk = MapChunk(chunk_bytes_);
  if (chunk == nullptr) return;  // Allocate() tries again, and warns
  chunks_[num_chunks_++] = static_cast<char*>(chunk);
  chunk_offset_ = 0;
}

uint32_t StackTable::Intern(const uintptr_t* pcs, int n) {
  if (n <= 0 || pcs == nullptr) return 0;
  n = std::min(n, kMaxFrames);
  if (slots_ == nullptr) {
    Drop();
    return 0;
  }
  const uint64_t hash = HashPcs(pcs, n);
  size_t empty_slot = 0;
  uint32_t id = Find(hash, pcs, n, &empty_slot);
  if (id != 0) return id;
  if (full_.load(std::memory_order_relaxed)) {
    Drop();
    return 0;
  }

  // New stack. Every thread inserting this same stack has the same hash and
  // so the same stripe: the second one waits here and then finds the first
  // one's record in the re-probe below, so a stack is stored once.
  std::lock_guard<Mutex> lock(stripes_[(hash >> 20) % kStripes].mu);
  id = Find(hash, pcs, n, &empty_slot);
  if (id != 0) return id;
  Record* record = Allocate(n, &id);
  if (record == nullptr) {
    Drop();
    return 0;
  }
  record->n = static_cast<uint32_t>(n);
  std::memcpy(PcsOf(record), pcs, static_cast<size_t>(n) * sizeof(uintptr_t));
  std::atomic_ref<const Record*>(by_id_[id]).store(record, std::memory_order_release);

  // Publish. A slot can be claimed between our probe and the CAS only by an
  // insert from another stripe, i.e. with a different hash and so a
  // different stack; then keep probing. Slots never empty again, so every
  // slot between the home slot and ours stays occupied and lock-free readers
  // cannot stop short of our entry. The load factor bound guarantees an
  // empty slot exists.
  const uint64_t value = (hash & 0xFFFFFFFF00000000ULL) | id;
  for (size_t i = empty_slot;; i = (i + 1) & slot_mask_) {
    uint64_t expected = 0;
    if (SlotRef(slots_, i).compare_exchange_strong(expected, value, std::memory_order_release,
                                                   std::memory_order_relaxed)) {
      break;
    }
  }
  return id;
}

// Lock order: stripe, then arena (as in Intern).
void StackTable::LockForFork() {
  for (Stripe& stripe : stripes_) stripe.mu.lock();
  arena_mu_.lock();
}

void StackTable::UnlockAfterFork() {
  arena_mu_.unlock();
  for (Stripe& stripe : stripes_) stripe.mu.unlock();
}

std::span<const uintptr_t> StackTable::Get(uint32_t id) const {
  if (id == 0 || id > max_stacks_ || by_id_ == nullptr) return {};
  const Record* record = std::atomic_ref<const Record*>(by_id_[id]).load(std::memory_order_acquire);
  if (record == nullptr) return {};
  return {PcsOf(record), record->n};
}

}  // namespace gpuwatch
