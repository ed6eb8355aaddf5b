// Names that a driver hands out by pointer (a kernel's symbolName, which
// points at the driver's storage for that function and is the same for
// every launch and activity record of it), interned by pointer: each
// distinct pointer gets an id and a copy of its text, made on first sight,
// that outlives the pointer (the report is written after modules unload).
//
// Intern() is on the launch path of every kernel: for a pointer seen before
// it is lock-free and allocation-free (an open-addressing table of atomic
// slots). A new pointer takes a mutex and may mmap a chunk of the
// RecordArena (base/arena.h) that holds the copies. When the table is full
// Intern() returns 0 and the caller counts the name as "(other)".
#ifndef GPUWATCH_LIBGPUWATCH_BASE_NAME_TABLE_H_
#define GPUWATCH_LIBGPUWATCH_BASE_NAME_TABLE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "libgpuwatch/base/arena.h"
#include "libgpuwatch/base/mutex.h"

namespace gpuwatch {

class NameTable {
 public:
  // Longer names are truncated when copied.
  static constexpr size_t kMaxNameBytes = size_t{16} << 10;

  // At most `max_names` distinct pointers (ids 1..max_names).
  explicit NameTable(uint32_t max_names);
  ~NameTable();
  NameTable(const NameTable&) = delete;
  NameTable& operator=(const NameTable&) = delete;

  // The id of `name`'s pointer, copying its text on first sight; 0 for
  // nullptr or when the table is full. Thread-safe. Inline: a pointer seen
  // before is found at its first probe, mostly (the table is kept sparse).
  uint32_t Intern(const char* name) {
    if (const uint32_t id = Find(name); id != 0) return id;
    return name != nullptr && slots_ != nullptr ? InternProbing(name) : 0;
  }
  // The id of a pointer interned before and found at its first probe; 0
  // otherwise (Intern then finds it further on, or makes it). Lock-free.
  uint32_t Find(const char* name) const {
    if (name == nullptr || slots_ == nullptr) return 0;
    Slot& slot = slots_[Home(name)];
    if (std::atomic_ref<const char*>(slot.key).load(std::memory_order_acquire) != name) return 0;
    return std::atomic_ref<uint32_t>(slot.id).load(std::memory_order_relaxed);
  }
  // The copy of an interned name; nullptr for 0 or an unknown id. Thread-safe,
  // lock-free; the text stays valid for the life of the table.
  const char* Name(uint32_t id) const { return static_cast<const char*>(arena_.Get(id)); }
  // Ids handed out (the last few may still be publishing).
  uint32_t size() const { return arena_.size(); }

  // For pthread_atfork: inserts' lock, then the arena's.
  void LockForFork() {
    mu_.lock();
    arena_.LockForFork();
  }
  void UnlockAfterFork() {
    arena_.UnlockAfterFork();
    mu_.unlock();
  }

 private:
  // Accessed only through std::atomic_ref (the slots are mmap'ed zeroes).
  struct Slot {
    const char* key;  // nullptr: empty; written last, with release
    uint32_t id;
  };
  // The slot a probe for `name` starts at: the top bits of the pointer
  // times 2^64 / phi (Fibonacci hashing), which mix all of its bits.
  size_t Home(const char* name) const {
    return static_cast<size_t>((reinterpret_cast<uintptr_t>(name) * 0x9E3779B97F4A7C15ULL) >>
                               slot_shift_);
  }
  // The slot holding `name` (*found = true), or the first empty one.
  Slot* SlotOf(const char* name, bool* found) const;
  // Intern() past the first probe: a collision, or a pointer not seen yet.
  uint32_t InternProbing(const char* name);

  Slot* slots_ = nullptr;
  size_t slot_mask_ = 0;
  int slot_shift_ = 63;  // 64 - log2(slots)
  size_t slots_bytes_ = 0;
  Mutex mu_;  // first sight of a pointer only
  RecordArena arena_;
};

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_BASE_NAME_TABLE_H_
