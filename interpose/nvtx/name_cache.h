// A thread's range names by pointer (nvtx.h's ThreadPhases; nvtx.cc):
// NVTX passes a range's name as a pointer, mostly the same literal each time,
// so a push finds its pointer here and compares the text with what it was
// interned as, instead of copying it, hashing it and probing the process's
// name table. The text is compared, not trusted: a pointer may come back
// with another text (a reused buffer, a Python string's copy), and then the
// name is interned again. Per thread: no lock, no atomic, no allocation.
#ifndef GPUWATCH_INTERPOSE_NVTX_NAME_CACHE_H_
#define GPUWATCH_INTERPOSE_NVTX_NAME_CACHE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "libgpuwatch/record/phases.h"

namespace gpuwatch {

class NameCache {
 public:
  // A name, and the path it opened last and where (0: none kept).
  struct Entry {
    const char* key = nullptr;
    uint16_t name = 0;  // 0: empty (NameText(0) is "": never matches a key)
    uint8_t domain = 0;
    uint8_t prefix = 0;   // bytes of the domain's prefix ("domain:") in the name
    uint16_t parent = 0;  // the path open when `path` was opened
    uint16_t path = 0;
  };

  // The entry of NUL-terminated `text` in `domain` when this thread put the
  // same pointer here with the same text; null otherwise. `table`: where the
  // name was interned.
  Entry* Find(const PhaseTable& table, const char* text, uint32_t domain) {
    const size_t set = SetOf(text, domain);
    for (size_t way = 0; way < kWays; ++way) {
      Entry& e = entries_[set + way];
      if (e.key == text && e.domain == domain && Holds(table.NameText(e.name), e.prefix, text)) {
        return &e;
      }
    }
    return nullptr;
  }

  // `text` in `domain` (<= 255) is name `name`, whose interned text is
  // `prefix` (<= 255) bytes of the domain's and then the text. Its own entry
  // when it has one, else the first way while it is empty, else the second:
  // a set's first name stays, so that names taken in turn, more of them than
  // a set holds, still find the first (least recently used would find none).
  Entry* Put(const char* text, uint32_t domain, uint32_t name, size_t prefix) {
    const size_t set = SetOf(text, domain);
    Entry* e = &entries_[set + 1];
    if (entries_[set].name == 0 || (entries_[set].key == text && entries_[set].domain == domain)) {
      e = &entries_[set];
    }
    *e = Entry{text, static_cast<uint16_t>(name), static_cast<uint8_t>(domain),
               static_cast<uint8_t>(prefix)};
    return e;
  }

 private:
  // 16 entries of 16 bytes, 8 sets of 2: initial-exec TLS, of which a
  // dlopen'ed library gets little.
  static constexpr size_t kWays = 2;
  static constexpr size_t kEntries = 16;
  // Whether `interned`, past its `prefix` bytes, is `text` (strncmp stops at
  // the first difference, so never reads past `text`'s end). A name cut to
  // its limit is every text that starts with it.
  static bool Holds(std::string_view interned, size_t prefix, const char* text) {
    if (interned.size() < prefix) return false;
    const size_t size = interned.size() - prefix;
    return std::strncmp(text, interned.data() + prefix, size) == 0 &&
           (text[size] == '\0' || interned.size() == kMaxPhaseNameBytes);
  }
  static size_t SetOf(const char* text, uint32_t domain) {
    const uint64_t key = reinterpret_cast<uintptr_t>(text) ^ domain;
    return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> 61) * kWays;
  }
  std::array<Entry, kEntries> entries_{};
};

}  // namespace gpuwatch

#endif  // GPUWATCH_INTERPOSE_NVTX_NAME_CACHE_H_
