// Interning of native stacks: each distinct stack is stored once and named by
// a small id that an allocation record carries instead of the pcs.
//
// Intern() runs on every recorded allocation, from any thread, usually inside
// a CUDA callback. Its common case (the stack was seen before) is lock-free
// and allocation-free: first the calling thread's own cache of the stacks it
// interned last (128 entries in two-way sets picked by five of the pcs; a
// stack found there is compared in full with its record), else hash the
// pcs, probe an open-addressing table of atomic 64-bit slots, compare
// against the stored pcs. Only a new stack takes a lock: one of 64 stripes
// chosen by the hash (so two threads inserting the same stack serialise and
// store it once) and, for a few nanoseconds, the arena lock that hands out
// an id and bytes; so does, rarely, a lookup that raced a doubling of the
// index (below). A new stack that doubles the index takes every stripe.
//
// Storage never moves and is never freed while the table lives: records sit
// in a RecordArena (base/arena.h: chunks of 64 KiB growing to 1 MiB, faulted
// in when mapped, so the resident size grows a chunk at a time; ids map to
// records through a fixed array). So Get(id) returns a span that stays valid, and a report
// writer may read it while other threads keep interning.
//
// Growth is bounded by the constructor's caps. When the table is full a new
// stack is not stored: Intern returns 0 ("no stack") and dropped() counts it.
// Stacks already stored are still found.
//
// Memory: besides the arena, an 8-byte id array per allowed stack, reserved
// with mmap up front and backed by pages only as ids are handed out (so 8
// bytes per stored stack), and the hash index: 8-byte slots at load <= 1/2,
// 4,096 at first, doubled when a new stack would pass half (16-32 bytes per
// stored stack; 256 KiB for 10,000). A doubling copies the slots into a new
// mapping under every stripe's lock and then publishes it; the old mapping
// stays mapped (readable) for the table's life but its pages are given back
// (MADV_DONTNEED), so a lookup still probing it reads empty slots: a miss,
// which the insert path checks again on the current index under its stripe's
// lock. README.md says why this and not a segmented index.
// Each thread that interns maps 4 KiB for its recent stacks (stack_table.cc),
// shared by every table and unmapped when the thread exits.
//
// fork(): a child inherits any of the table's mutexes that another thread
// held at the fork, locked forever. The owner must call LockForFork() /
// UnlockAfterFork() from its pthread_atfork handlers.
#ifndef GPUWATCH_LIBGPUWATCH_STACKS_STACK_TABLE_H_
#define GPUWATCH_LIBGPUWATCH_STACKS_STACK_TABLE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>

#include "libgpuwatch/base/arena.h"
#include "libgpuwatch/base/mutex.h"
#include "libgpuwatch/stacks/python_frames.h"

namespace gpuwatch {

// The padding is deliberate: members that different threads write sit on
// cache lines of their own.
class StackTable {  // NOLINT(clang-analyzer-optin.performance.Padding)
 public:
  // Stacks longer than this are truncated to their first kMaxFrames pcs
  // (the frames nearest the allocation).
  static constexpr int kMaxFrames = 256;
  // Arena chunk size; also the granule of the byte cap.
  static constexpr size_t kChunkBytes = RecordArena::kDefaultChunkBytes;

  // `max_stacks`: the most distinct stacks stored (ids 1..max_stacks).
  // `max_bytes`: the most arena memory for records (8 bytes of header plus 8
  // per pc each), rounded up to whole chunks. Allocation failures (mmap) are
  // reported with one warning and leave a table that drops everything; the
  // constructor never throws.
  StackTable(uint32_t max_stacks, size_t max_bytes);
  // Unmaps everything. Spans from Get() die with the table. Must not run
  // concurrently with any other member; gpuwatch's own table is never
  // destroyed.
  ~StackTable();

  StackTable(const StackTable&) = delete;
  StackTable& operator=(const StackTable&) = delete;

  // Returns the id of the stack pcs[0..n), storing it if it is new. Returns 0
  // when n <= 0 or the stack is new and the table is full (counted in
  // dropped()). Thread-safe. Lock-free and allocation-free when the stack is
  // already stored; a new stack takes two short mutexes and may mmap a new
  // chunk. A thread's first call maps its cache of recent stacks (below).
  // Not async-signal-safe, nor re-entrant on one thread.
  uint32_t Intern(const uintptr_t* pcs, int n);

  // How many Intern() calls of the calling thread, in any table, found their
  // stack in the thread's cache of recent stacks (tests).
  static uint64_t RecentHitsOnThisThread();

  // Maps the arena's first chunk now (faulting its pages in), so that the
  // first Intern() does not; later the next chunk, once the last is half used
  // (RecordArena::Prepare): attach, then gpuwatch's background thread, call
  // it. Thread-safe.
  void Prepare();

  // The pcs of `id`, or an empty span for 0, an unknown id, or an id whose
  // insertion has not finished publishing. The span stays valid and
  // unchanged for the life of the table. Thread-safe, lock-free,
  // async-signal-safe.
  std::span<const uintptr_t> Get(uint32_t id) const;

  // Calls fn(uint32_t id, std::span<const uintptr_t> pcs) for every stored
  // stack in increasing id order. Stacks interned concurrently may or may not
  // be visited. Thread-safe with concurrent Intern(); takes no lock.
  template <typename Fn>
  void ForEach(Fn&& fn) const {
    const uint32_t last = size();
    for (uint32_t id = 1; id <= last; ++id) {
      const std::span<const uintptr_t> pcs = Get(id);
      if (!pcs.empty()) fn(id, pcs);
    }
  }

  // The Python frames the stacks' Python tokens name (python_frames.h,
  // python_stack.h): made by EnablePythonFrames, null until then (and in a
  // process without a supported CPython). Owned by the table, so shared with
  // a fork child like the stacks themselves. The capture path reaches it
  // through the Session (Session::stacks()), the report path through the
  // table a SiteResolver reads.
  PyFrameTable* python_frames() const { return python_frames_.get(); }
  // Makes the Python frame table (256 Ki frames in at most 64 MiB). Once,
  // before any thread can capture into it: attach calls it before it
  // publishes the Session, when InitPythonStacks() found a CPython.
  void EnablePythonFrames();

  // For pthread_atfork: LockForFork() in the prepare handler takes every
  // lock of the table and of its Python frame table (no insert is in flight
  // afterwards); UnlockAfterFork() in both the parent and the child handler
  // releases them. Lock-free lookups are unaffected.
  void LockForFork();
  void UnlockAfterFork();

  // Number of ids handed out (stored stacks; the last few may still be
  // publishing). Thread-safe.
  uint32_t size() const { return arena_.size(); }
  // Arena bytes used by stored records. Thread-safe.
  size_t bytes_used() const { return arena_.bytes_used(); }
  // Intern() calls that returned 0 because the table was full (each call is
  // counted, so a stack dropped twice counts twice). Thread-safe.
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }
  uint32_t max_stacks() const { return arena_.max_records(); }
  size_t max_bytes() const { return arena_.max_bytes(); }
  // Bytes of the current hash index (its mapping; grows with the stacks).
  // Thread-safe.
  size_t index_bytes() const {
    const Index* index = index_.load(std::memory_order_acquire);
    return index != nullptr ? index->bytes : 0;
  }

 private:
  std::unique_ptr<PyFrameTable> python_frames_;
  // A record in the arena: this header, then `n` pcs (see PcsOf).
  struct Record {
    uint32_t n;
    uint32_t hash_low;  // the low 32 bits of the pcs' hash (a slot keeps the high ones)
  };
  static const uintptr_t* PcsOf(const Record* record) {
    return reinterpret_cast<const uintptr_t*>(record + 1);
  }
  static uintptr_t* PcsOf(Record* record) { return reinterpret_cast<uintptr_t*>(record + 1); }

  static constexpr int kStripes = 64;
  struct alignas(64) Stripe {
    Mutex mu;
  };

  // The hash index: 2^k slots, 0 = empty, otherwise (hash >> 32) << 32 | id.
  // Slots are accessed only through std::atomic_ref and written once (CAS
  // from 0), after the record is published. An Index is written before it is
  // published in index_ and never changes afterwards.
  struct Index {
    uint64_t* slots = nullptr;
    size_t mask = 0;
    size_t bytes = 0;
  };
  // Doublings from the first index to the largest (2^32 slots): enough.
  static constexpr int kMaxIndexes = 24;

  // Intern() without the thread's cache: hash, probe, insert.
  uint32_t InternShared(const uintptr_t* pcs, int n);
  // Probes `index` from the hash's home slot. Returns the id of an equal
  // stored stack, or 0 and the index of the first empty slot seen in
  // *empty_slot.
  uint32_t Find(const Index& index, uint64_t hash, const uintptr_t* pcs, int n,
                size_t* empty_slot) const;
  // Whether one more stack would load the current index past half while a
  // larger one is allowed. Called holding a stripe.
  bool IndexFull() const;
  // Doubles the index (until ids handed out fill at most half of it) unless
  // another thread did: takes every stripe, so no insert is in flight.
  // Returns false when the new index cannot be mapped (the old one stays,
  // and new stacks are dropped once it is half full).
  bool GrowIndex();
  const Record* RecordOf(uint32_t id) const { return static_cast<const Record*>(arena_.Get(id)); }
  void Drop() { dropped_.fetch_add(1, std::memory_order_relaxed); }

  // The current index (one of indexes_), read with acquire; null when the
  // first could not be mapped.
  std::atomic<const Index*> index_{nullptr};
  // Every index made, the current one last; the older ones are kept mapped
  // with their pages given back. Written under every stripe's lock.
  Index indexes_[kMaxIndexes];
  int num_indexes_ = 0;
  // The most slots an index may have: enough for every allowed id at load 1/2.
  size_t max_slots_ = 0;
  // Names this table in the threads' caches of recent stacks (never 0, never
  // reused).
  uint64_t serial_;

  RecordArena arena_;
  alignas(64) std::atomic<uint64_t> dropped_{0};
  Stripe stripes_[kStripes];
};

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_STACKS_STACK_TABLE_H_
