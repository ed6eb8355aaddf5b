#include "libgpuwatch/base/name_table.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <mutex>

#include "libgpuwatch/base/log.h"

namespace gpuwatch {

namespace {
// Copies take a few hundred bytes on average (mangled C++ names); chunks
// small enough that a process with a few kernels keeps little resident.
constexpr size_t kNameChunkBytes = size_t{64} << 10;
constexpr size_t kNameBytesEach = size_t{4} << 10;  // the arena's cap, per name allowed

// A found slot's id: the acquire load of its key made it visible.
template <typename Slot>
uint32_t IdOf(Slot* slot) {
  return std::atomic_ref<uint32_t>(slot->id).load(std::memory_order_relaxed);
}
}  // namespace

NameTable::NameTable(uint32_t max_names)
    : arena_(max_names, std::max(size_t{max_names} * kNameBytesEach, kNameChunkBytes),
             kNameChunkBytes, "names") {
  static_assert(kNameChunkBytes > NameTable::kMaxNameBytes, "a chunk holds the longest copy");
  if (!arena_.usable()) return;
  slots_ =
      static_cast<Slot*>(MapSlots(arena_.max_records(), sizeof(Slot), &slot_mask_, &slots_bytes_));
  slot_shift_ = 64 - std::bit_width(slot_mask_);  // slots: a power of 2, at least 2
  if (slots_ == nullptr) {
    Warn("cannot map %zu bytes for names; they will not be recorded", slots_bytes_);
  }
}

NameTable::~NameTable() { Unmap(slots_, slots_bytes_); }

NameTable::Slot* NameTable::SlotOf(const char* name, bool* found) const {
  for (size_t i = Home(name);; i = (i + 1) & slot_mask_) {
    const char* key = std::atomic_ref<const char*>(slots_[i].key).load(std::memory_order_acquire);
    if (key == name || key == nullptr) {
      *found = key != nullptr;
      return &slots_[i];
    }
  }
}

uint32_t NameTable::InternProbing(const char* name) {
  bool found = false;
  Slot* slot = SlotOf(name, &found);
  if (found) return IdOf(slot);
  if (arena_.full()) return 0;
  std::lock_guard<Mutex> lock(mu_);
  // Inserts are serialised, so the slot found here stays empty until ours.
  slot = SlotOf(name, &found);
  if (found) return IdOf(slot);
  const size_t length = strnlen(name, kMaxNameBytes);
  uint32_t id = 0;
  auto* copy = static_cast<char*>(arena_.Allocate(length + 1, &id));
  if (copy == nullptr) return 0;
  std::memcpy(copy, name, length);  // the arena's bytes are zero: the copy is terminated
  arena_.Publish(id, copy);
  std::atomic_ref<uint32_t>(slot->id).store(id, std::memory_order_relaxed);
  std::atomic_ref<const char*>(slot->key).store(name, std::memory_order_release);  // publishes
  return id;
}

}  // namespace gpuwatch
