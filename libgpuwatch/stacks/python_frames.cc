#include "libgpuwatch/stacks/python_frames.h"

#include <algorithm>
#include <cstring>

#include "libgpuwatch/base/log.h"

namespace gpuwatch {

namespace {

inline uint64_t HashKey(const PyFrameKey& key) {
  uint64_t h = key.code * 0x9E3779B97F4A7C15ULL;
  h ^= (static_cast<uint64_t>(static_cast<uint32_t>(key.lasti)) << 32 | key.check) *
       0xC2B2AE3D27D4EB4FULL;
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDULL;
  h ^= h >> 33;
  return h;
}

inline uint64_t MetaOf(const PyFrameKey& key) {
  return static_cast<uint64_t>(static_cast<uint32_t>(key.lasti)) << 32 | key.check;
}

template <typename T>
std::atomic_ref<T> Ref(T& value) {
  return std::atomic_ref<T>(value);
}

}  // namespace

PyFrameTable::PyFrameTable(uint32_t max_frames, size_t max_bytes)
    : arena_(std::min<uint32_t>(max_frames, UINT32_MAX >> 2), max_bytes,
             RecordArena::kDefaultChunkBytes, "Python frames") {
  if (!arena_.usable()) return;
  slots_ =
      static_cast<Slot*>(MapSlots(arena_.max_records(), sizeof(Slot), &slot_mask_, &slots_bytes_));
  if (slots_ == nullptr) {
    Warn("cannot map %zu bytes for Python frames; stacks will have native frames only",
         slots_bytes_);
  }
}

PyFrameTable::~PyFrameTable() { Unmap(slots_, slots_bytes_); }

void PyFrameTable::LockForFork() {
  mu_.lock();
  arena_.LockForFork();
}

void PyFrameTable::UnlockAfterFork() {
  arena_.UnlockAfterFork();
  mu_.unlock();
}

// Probes from the key's home slot: the slot holding the key (*found = true)
// or the first empty one. The load factor bound (<= 1/2) guarantees one.
size_t PyFrameTable::SlotOf(const PyFrameKey& key, bool* found) const {
  const uint64_t meta = MetaOf(key);
  for (size_t i = HashKey(key) & slot_mask_;; i = (i + 1) & slot_mask_) {
    Slot& slot = slots_[i];
    // Acquire pairs with Insert's release store: seeing the code means seeing
    // meta and id.
    const uint64_t code = Ref(slot.code).load(std::memory_order_acquire);
    if (code == 0) {
      *found = false;
      return i;
    }
    if (code == key.code && Ref(slot.meta).load(std::memory_order_relaxed) == meta) {
      *found = true;
      return i;
    }
  }
}

uint32_t PyFrameTable::Find(const PyFrameKey& key) const {
  if (slots_ == nullptr || key.code == 0) return 0;
  bool found = false;
  const size_t i = SlotOf(key, &found);
  return found ? static_cast<uint32_t>(Ref(slots_[i].id).load(std::memory_order_relaxed)) : 0;
}

uint32_t PyFrameTable::Insert(const PyFrameKey& key, std::string_view file,
                              std::string_view function, int line) {
  if (slots_ == nullptr || key.code == 0) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return 0;
  }
  file = file.substr(0, kMaxString);
  function = function.substr(0, kMaxString);
  std::lock_guard<Mutex> lock(mu_);
  // Inserts are serialised, so the slot found here stays free until ours.
  bool found = false;
  const size_t slot = SlotOf(key, &found);
  if (found) return static_cast<uint32_t>(Ref(slots_[slot].id).load(std::memory_order_relaxed));
  const size_t bytes = sizeof(Record) + file.size() + function.size();
  uint32_t id = 0;
  auto* record = static_cast<Record*>(arena_.Allocate(bytes, &id));
  if (record == nullptr) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return 0;
  }
  record->line = line;
  record->file_len = static_cast<uint16_t>(file.size());
  record->function_len = static_cast<uint16_t>(function.size());
  char* text = reinterpret_cast<char*>(record + 1);
  std::memcpy(text, file.data(), file.size());
  std::memcpy(text + file.size(), function.data(), function.size());
  arena_.Publish(id, record);
  Slot& s = slots_[slot];
  Ref(s.meta).store(MetaOf(key), std::memory_order_relaxed);
  Ref(s.id).store(id, std::memory_order_relaxed);
  Ref(s.code).store(key.code, std::memory_order_release);  // publishes the slot
  return id;
}

bool PyFrameTable::Get(uint32_t id, PyFrameInfo* out) const {
  const auto* record = static_cast<const Record*>(arena_.Get(id));
  if (record == nullptr) return false;
  const char* text = reinterpret_cast<const char*>(record + 1);
  out->file = std::string_view(text, record->file_len);
  out->function = std::string_view(text + record->file_len, record->function_len);
  out->line = record->line;
  return true;
}

}  // namespace gpuwatch
