#include "libgpuwatch/stacks/stack_table.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "libgpuwatch/base/log.h"

namespace gpuwatch {

namespace {

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
    : arena_(max_stacks, max_bytes, kChunkBytes, "stacks") {
  if (!arena_.usable()) return;
  slots_ = static_cast<uint64_t*>(
      MapSlots(arena_.max_records(), sizeof(uint64_t), &slot_mask_, &slots_bytes_));
  if (slots_ == nullptr) {
    Warn("cannot map %zu bytes for the stack table; stacks will not be recorded", slots_bytes_);
  }
}

StackTable::~StackTable() { Unmap(slots_, slots_bytes_); }

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
    const Record* record = RecordOf(id);
    if (record->n == static_cast<uint32_t>(n) && std::memcmp(PcsOf(record), pcs, bytes) == 0) {
      return id;
    }
  }
}

void StackTable::Prepare() { arena_.Prepare(); }

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
  if (arena_.full()) {
    Drop();
    return 0;
  }

  // New stack. Every thread inserting this same stack has the same hash and
  // so the same stripe: the second one waits here and then finds the first
  // one's record in the re-probe below, so a stack is stored once.
  std::lock_guard<Mutex> lock(stripes_[(hash >> 20) % kStripes].mu);
  id = Find(hash, pcs, n, &empty_slot);
  if (id != 0) return id;
  const size_t pcs_bytes = static_cast<size_t>(n) * sizeof(uintptr_t);
  auto* record = static_cast<Record*>(arena_.Allocate(sizeof(Record) + pcs_bytes, &id));
  if (record == nullptr) {
    Drop();
    return 0;
  }
  record->n = static_cast<uint32_t>(n);
  std::memcpy(PcsOf(record), pcs, pcs_bytes);
  arena_.Publish(id, record);

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
void StackTable::EnablePythonFrames() {
  if (python_frames_ == nullptr)
    python_frames_ = std::make_unique<PyFrameTable>(1u << 18, size_t{64} << 20);
}

void StackTable::LockForFork() {
  for (Stripe& stripe : stripes_) stripe.mu.lock();
  arena_.LockForFork();
  if (python_frames_ != nullptr) python_frames_->LockForFork();
}

void StackTable::UnlockAfterFork() {
  if (python_frames_ != nullptr) python_frames_->UnlockAfterFork();
  arena_.UnlockAfterFork();
  for (Stripe& stripe : stripes_) stripe.mu.unlock();
}

std::span<const uintptr_t> StackTable::Get(uint32_t id) const {
  const Record* record = RecordOf(id);
  if (record == nullptr) return {};
  return {PcsOf(record), record->n};
}

}  // namespace gpuwatch
