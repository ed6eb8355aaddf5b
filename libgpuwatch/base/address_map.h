// An open-addressing hash map from non-zero 64-bit addresses to small values.
//
// Used for the live-allocation table, where memory per entry and the cost of
// an insert or erase under a shard lock matter. Linear probing with
// backward-shift deletion (no tombstones), so lookups stay short after
// millions of alloc/free pairs. Grows by doubling at 7/8 load.
//
// Not thread-safe: callers shard it and hold a lock per shard.
#ifndef GPUWATCH_LIBGPUWATCH_BASE_ADDRESS_MAP_H_
#define GPUWATCH_LIBGPUWATCH_BASE_ADDRESS_MAP_H_

#include <cstdint>
#include <cstdlib>
#include <new>
#include <type_traits>
#include <utility>

namespace gpuwatch {

template <typename V>
class AddressMap {
  static_assert(std::is_trivially_copyable_v<V>, "values are moved with plain copies");

 public:
  AddressMap() = default;
  AddressMap(const AddressMap&) = delete;
  AddressMap& operator=(const AddressMap&) = delete;
  ~AddressMap() { std::free(slots_); }

  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }
  size_t bytes() const { return capacity_ * sizeof(Slot); }

  // Inserts or replaces. Returns true when `key` was already present, with the
  // previous value in *old. Returns false on a fresh insert, or when the table
  // cannot grow (then *dropped is set and nothing is stored).
  bool Upsert(uint64_t key, const V& value, V* old, bool* dropped) {
    *dropped = false;
    if ((size_ + 1) * 8 > capacity_ * 7 && !Grow()) {
      *dropped = true;
      return false;
    }
    size_t i = Home(key);
    while (slots_[i].key != 0) {
      if (slots_[i].key == key) {
        *old = slots_[i].value;
        slots_[i].value = value;
        return true;
      }
      i = (i + 1) & mask_;
    }
    slots_[i].key = key;
    slots_[i].value = value;
    ++size_;
    return false;
  }

  const V* Find(uint64_t key) const {
    if (size_ == 0) return nullptr;
    for (size_t i = Home(key); slots_[i].key != 0; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return &slots_[i].value;
    }
    return nullptr;
  }
  V* Find(uint64_t key) { return const_cast<V*>(std::as_const(*this).Find(key)); }

  // Removes `key`; returns false when absent.
  bool Erase(uint64_t key, V* out) {
    if (size_ == 0) return false;
    size_t i = Home(key);
    while (slots_[i].key != key) {
      if (slots_[i].key == 0) return false;
      i = (i + 1) & mask_;
    }
    *out = slots_[i].value;
    // Backward shift: move later members of the probe run into the hole.
    size_t hole = i;
    for (size_t j = (i + 1) & mask_; slots_[j].key != 0; j = (j + 1) & mask_) {
      const size_t home = Home(slots_[j].key);
      // Move j into the hole when its home is not in (hole, j] cyclically.
      const bool in_range = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
      if (!in_range) {
        slots_[hole] = slots_[j];
        hole = j;
      }
    }
    slots_[hole].key = 0;
    --size_;
    return true;
  }

  // Empties the table and keeps its capacity.
  void Clear() {
    for (size_t i = 0; i < capacity_; ++i) slots_[i].key = 0;
    size_ = 0;
  }

  template <typename F>
  void ForEach(F&& f) const {
    for (size_t i = 0; i < capacity_; ++i) {
      if (slots_[i].key != 0) f(slots_[i].key, slots_[i].value);
    }
  }

 private:
  struct Slot {
    uint64_t key;
    V value;
  };

  size_t Home(uint64_t key) const {
    // Fibonacci hashing: allocations are aligned, so the low bits carry little.
    return static_cast<size_t>((key * 0x9E3779B97F4A7C15ULL) >> shift_);
  }

  bool Grow() {
    const size_t new_capacity = capacity_ == 0 ? 16 : capacity_ * 2;
    auto* fresh = static_cast<Slot*>(std::calloc(new_capacity, sizeof(Slot)));
    if (fresh == nullptr) return false;
    Slot* old = slots_;
    const size_t old_capacity = capacity_;
    slots_ = fresh;
    capacity_ = new_capacity;
    mask_ = new_capacity - 1;
    shift_ = 64 - __builtin_ctzll(new_capacity);
    size_ = 0;
    for (size_t i = 0; i < old_capacity; ++i) {
      if (old[i].key == 0) continue;
      size_t j = Home(old[i].key);
      while (slots_[j].key != 0) j = (j + 1) & mask_;
      slots_[j] = old[i];
      ++size_;
    }
    std::free(old);
    return true;
  }

  Slot* slots_ = nullptr;
  size_t capacity_ = 0;
  size_t mask_ = 0;
  int shift_ = 64;
  size_t size_ = 0;
};

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_BASE_ADDRESS_MAP_H_
