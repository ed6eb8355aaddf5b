// nvtx.cc's two small tools: the buffer a range's name is built in (ASCII or
// wide text, bounded, no allocation) and the map from another NVTX tool's
// handles to gpuwatch's ids (lock-free lookups). For nvtx.cc only.
#ifndef GPUWATCH_INTERPOSE_NVTX_NVTX_NAMES_H_
#define GPUWATCH_INTERPOSE_NVTX_NVTX_NAMES_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string_view>
#include <type_traits>

#include "libgpuwatch/base/mutex.h"
#include "libgpuwatch/base/utf8.h"
#include "libgpuwatch/record/phases.h"

namespace gpuwatch {

// A range's name as it is built, on the stack: text appended until
// kMaxPhaseNameBytes, the rest cut (no allocation in a callback).
class NameBuffer {
 public:
  void Append(std::string_view s) {
    const size_t n = std::min(s.size(), sizeof(text_) - 1 - size_);
    std::memcpy(text_ + size_, s.data(), n);
    size_ += n;
  }
  void AppendWide(const wchar_t* s) {
    // UTF-8, enough for names; from the first character that does not fit, cut.
    for (; s != nullptr && *s != 0; ++s) {
      const auto c = static_cast<uint32_t>(static_cast<std::make_unsigned_t<wchar_t>>(*s));
      const size_t end = PutUtf8(c, text_, size_, sizeof(text_) - 1);
      if (end == size_) break;
      size_ = end;
    }
  }
  std::string_view view() const { return {text_, size_}; }

 private:
  char text_[kMaxPhaseNameBytes + 1];  // NOLINT: filled up to size_, never read past it
  size_t size_ = 0;
};

// The other tool's handles to gpuwatch's ids: lock-free lookups, a mutex to
// add (creation and registration are rare).
class HandleMap {
 public:
  void Put(const void* handle, uint32_t id) {
    const auto key = reinterpret_cast<uintptr_t>(handle);
    if (key == 0) return;
    std::lock_guard<Mutex> lock(mu_);
    for (size_t i = SlotOf(key), n = 0; n < kSlots; i = (i + 1) % kSlots, ++n) {
      const uintptr_t k = slots_[i].key.load(std::memory_order_relaxed);
      if (k == key || k == 0) {
        slots_[i].id.store(id, std::memory_order_relaxed);
        slots_[i].key.store(key, std::memory_order_release);
        return;
      }
    }  // full: the handle stays unknown
  }
  // 0 when `handle` is not one the map holds.
  uint32_t Get(const void* handle) const {
    const auto key = reinterpret_cast<uintptr_t>(handle);
    if (key == 0 || !used_.load(std::memory_order_relaxed)) return 0;
    for (size_t i = SlotOf(key), n = 0; n < kSlots; i = (i + 1) % kSlots, ++n) {
      const uintptr_t k = slots_[i].key.load(std::memory_order_acquire);
      if (k == key) return slots_[i].id.load(std::memory_order_relaxed);
      if (k == 0) return 0;
    }
    return 0;
  }
  void MarkUsed() { used_.store(true, std::memory_order_relaxed); }
  Mutex& mutex() { return mu_; }  // for fork

 private:
  static constexpr size_t kSlots = 8192;
  static size_t SlotOf(uintptr_t key) { return (key * 0x9E3779B97F4A7C15ull >> 40) % kSlots; }
  struct Entry {
    std::atomic<uintptr_t> key{0};
    std::atomic<uint32_t> id{0};
  };
  std::unique_ptr<Entry[]> slots_{new Entry[kSlots]};
  Mutex mu_;
  std::atomic<bool> used_{false};
};
}  // namespace gpuwatch

#endif  // GPUWATCH_INTERPOSE_NVTX_NVTX_NAMES_H_
