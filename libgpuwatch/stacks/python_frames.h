// Interning of Python frames, and how they travel inside a captured stack.
//
// A captured stack is a sequence of uintptr_t (StackTable). Native frames are
// return addresses; Python frames are tokens: bit 63 set (no user-space pc on
// x86-64 or AArch64 has it), bit 62 marking the outermost Python frame run by
// one C-level call of the interpreter's eval loop (see python_stack.h), and
// the low 32 bits an id into a PyFrameTable. A stack holds its native pcs
// first, innermost first, then its Python tokens, innermost first; the report
// merges the two (mixed_stack.h).
//
// PyFrameTable maps a Python frame's identity -- (code object address,
// instruction offset, a check word derived from the code object's name,
// filename and first line) -- to an id naming (file, function, line). The
// strings are copied when a key is first seen, because the code object may be
// gone by report time (the exit report is written after Python finalized).
// The check word guards against a freed code object whose address is reused
// by another one: the key then differs and gets an entry of its own.
//
// Find() runs for every Python frame of every captured stack, often inside a
// CUDA callback and without the GIL: it is lock-free and allocation-free (an
// open-addressing table of atomically published slots). Insert() takes one
// mutex and may mmap a new arena chunk (a RecordArena, base/arena.h, as the
// stack table's). Storage never moves and is never freed, so Get() stays
// valid while other threads insert. When the table is
// full, Insert() returns 0 and dropped() counts it; the frame then reads as
// an unknown Python frame.
//
// fork(): LockForFork()/UnlockAfterFork() from pthread_atfork handlers, as for
// StackTable.
#ifndef GPUWATCH_LIBGPUWATCH_STACKS_PYTHON_FRAMES_H_
#define GPUWATCH_LIBGPUWATCH_STACKS_PYTHON_FRAMES_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string_view>

#include "libgpuwatch/base/arena.h"
#include "libgpuwatch/base/mutex.h"

namespace gpuwatch {

inline constexpr uintptr_t kPythonTokenTag = uintptr_t{1} << 63;
inline constexpr uintptr_t kPythonTokenEntry = uintptr_t{1} << 62;

// True when a stack entry is a Python frame token rather than a native pc.
inline bool IsPythonToken(uintptr_t value) { return (value & kPythonTokenTag) != 0; }
inline uintptr_t MakePythonToken(uint32_t id, bool entry) {
  return kPythonTokenTag | (entry ? kPythonTokenEntry : 0) | id;
}
inline uint32_t PythonTokenId(uintptr_t token) { return static_cast<uint32_t>(token); }
// True for the outermost Python frame of one C-level eval loop call.
inline bool PythonTokenIsEntry(uintptr_t token) { return (token & kPythonTokenEntry) != 0; }

struct PyFrameKey {
  uintptr_t code = 0;  // code object address; never 0 for a real frame
  int32_t lasti = 0;   // instruction offset in the code object
  uint32_t check = 0;  // identity of the code object beyond its address
  bool operator==(const PyFrameKey&) const = default;
};

// A stored Python frame. The views stay valid for the life of the table.
struct PyFrameInfo {
  std::string_view file;      // co_filename as the interpreter has it
  std::string_view function;  // co_qualname (3.11+) or co_name
  int line = 0;               // 1-based; 0 when unknown
};

class PyFrameTable {  // NOLINT(clang-analyzer-optin.performance.Padding)
 public:
  // Strings longer than this are truncated when stored.
  static constexpr size_t kMaxString = 1024;

  // At most `max_frames` entries (ids 1..max_frames) in at most `max_bytes`
  // of arena (rounded up to whole chunks). A failed mmap costs one warning
  // and leaves a table that drops every insert; never throws.
  PyFrameTable(uint32_t max_frames, size_t max_bytes);
  ~PyFrameTable();
  PyFrameTable(const PyFrameTable&) = delete;
  PyFrameTable& operator=(const PyFrameTable&) = delete;

  // The id of `key`, or 0 when it is not stored (yet). Thread-safe,
  // lock-free, allocation-free, async-signal-safe.
  uint32_t Find(const PyFrameKey& key) const;

  // Stores `key` with copies of the strings (truncated to kMaxString) unless
  // it is there already; returns its id, or 0 when the table is full.
  // Thread-safe; takes a mutex, may mmap. Not async-signal-safe.
  uint32_t Insert(const PyFrameKey& key, std::string_view file, std::string_view function,
                  int line);

  // The frame of `id`; false for 0 or an unknown id. Thread-safe, lock-free.
  bool Get(uint32_t id, PyFrameInfo* out) const;

  // For pthread_atfork: inserts' lock, then the arena's (as in Insert).
  void LockForFork();
  void UnlockAfterFork();

  uint32_t size() const { return arena_.size(); }
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

 private:
  struct Slot {
    uint64_t code;  // 0: empty; written last, with release
    uint64_t meta;  // lasti << 32 | check
    uint64_t id;
    uint64_t pad;
  };
  struct Record {
    int32_t line;
    uint16_t file_len;
    uint16_t function_len;
    // file bytes, then function bytes
  };

  size_t SlotOf(const PyFrameKey& key, bool* found) const;

  Slot* slots_ = nullptr;
  size_t slot_mask_ = 0;
  size_t slots_bytes_ = 0;
  RecordArena arena_;

  alignas(64) Mutex mu_;  // serialises inserts (a slot is claimed under it)
  alignas(64) std::atomic<uint64_t> dropped_{0};
};

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_STACKS_PYTHON_FRAMES_H_
