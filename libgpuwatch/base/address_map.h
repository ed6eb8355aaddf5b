// An open-addressing hash map from non-zero 64-bit addresses to small values.
//
// Used for the live-allocation table, where memory per entry and the cost of
// an insert or erase under a shard lock matter. Linear probing with
// backward-shift deletion (no tombstones), so lookups stay short after
// millions of alloc/free pairs. Grows by a quarter at 7/8 load, so that the
// table is 70% to 88% full however many entries it holds: 27 to 34 bytes
// per entry of 24 (doubling left it 44% full just past a growth, 55 bytes;
// growing by half, 58%, 41 bytes; docs/BENCHMARKS.md). The price: a growth
// moves every entry, 4 moves per insert amortized instead of 2, and probe
// runs a little longer on average. The capacity is no power of two: a key's
// home slot is its Fibonacci hash scaled to the capacity (a multiply, no
// division). Slots of 64 KiB and more are mapped, not taken from malloc: a
// table left behind by a growth goes back to the system at once, where
// malloc would keep it in its heap once its threshold for mapping had risen.
//
// Not thread-safe: callers shard it and hold a lock per shard.
#ifndef GPUWATCH_LIBGPUWATCH_BASE_ADDRESS_MAP_H_
#define GPUWATCH_LIBGPUWATCH_BASE_ADDRESS_MAP_H_

#include <sys/mman.h>

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
  ~AddressMap() { FreeSlots(slots_, capacity_); }

  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }
  size_t bytes() const { return capacity_ * sizeof(Slot); }

  // Inserts or replaces. Returns true when `key` was already present, with the
  // previous value in *old. Returns false on a fresh insert, or when the table
  // cannot grow (then *dropped is set and nothing is stored). Inline, as
  // Erase: the tracker's allocation and free make no call for them.
  [[gnu::always_inline]] bool Upsert(uint64_t key, const V& value, V* old, bool* dropped) {
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
      i = Next(i);
    }
    slots_[i].key = key;
    slots_[i].value = value;
    ++size_;
    return false;
  }

  const V* Find(uint64_t key) const {
    if (size_ == 0) return nullptr;
    for (size_t i = Home(key); slots_[i].key != 0; i = Next(i)) {
      if (slots_[i].key == key) return &slots_[i].value;
    }
    return nullptr;
  }
  V* Find(uint64_t key) { return const_cast<V*>(std::as_const(*this).Find(key)); }

  // Removes `key`; returns false when absent.
  [[gnu::always_inline]] bool Erase(uint64_t key, V* out) {
    if (size_ == 0) return false;
    size_t i = Home(key);
    while (slots_[i].key != key) {
      if (slots_[i].key == 0) return false;
      i = Next(i);
    }
    *out = slots_[i].value;
    // Backward shift: move later members of the probe run into the hole.
    size_t hole = i;
    for (size_t j = Next(i); slots_[j].key != 0; j = Next(j)) {
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
    // Fibonacci hashing (allocations are aligned, so the low bits carry
    // little), its 64 bits taken as a fraction of the capacity.
    const uint64_t hash = key * 0x9E3779B97F4A7C15ULL;
    return static_cast<size_t>((static_cast<unsigned __int128>(hash) * capacity_) >> 64);
  }
  size_t Next(size_t i) const { return i + 1 == capacity_ ? 0 : i + 1; }

  static constexpr size_t kMapBytes = size_t{64} << 10;
  // Zeroed slots.
  static Slot* AllocSlots(size_t n) {
    if (n * sizeof(Slot) < kMapBytes) return static_cast<Slot*>(std::calloc(n, sizeof(Slot)));
    void* mem =
        mmap(nullptr, n * sizeof(Slot), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return mem == MAP_FAILED ? nullptr : static_cast<Slot*>(mem);
  }
  static void FreeSlots(Slot* slots, size_t n) {
    if (slots == nullptr) return;
    if (n * sizeof(Slot) < kMapBytes) {
      std::free(slots);
    } else {
      munmap(slots, n * sizeof(Slot));
    }
  }

  [[gnu::noinline, gnu::cold]] bool Grow() {
    const size_t new_capacity = capacity_ == 0 ? 16 : capacity_ + capacity_ / 4;
    Slot* fresh = AllocSlots(new_capacity);
    if (fresh == nullptr) return false;
    Slot* old = slots_;
    const size_t old_capacity = capacity_;
    slots_ = fresh;
    capacity_ = new_capacity;
    size_ = 0;
    for (size_t i = 0; i < old_capacity; ++i) {
      if (old[i].key == 0) continue;
      size_t j = Home(old[i].key);
      while (slots_[j].key != 0) j = Next(j);
      slots_[j] = old[i];
      ++size_;
    }
    FreeSlots(old, old_capacity);
    return true;
  }

  Slot* slots_ = nullptr;
  size_t capacity_ = 0;
  size_t size_ = 0;
};

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_BASE_ADDRESS_MAP_H_
