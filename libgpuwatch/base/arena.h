// Append-only storage for records named by small ids, shared by the interned
// tables (the stack table, the Python frame table, the name table).
//
// A record's bytes come from chunks mmap'ed whole (faulted in by the mmap:
// one syscall instead of a page fault per page on an allocating thread),
// filled front to back, never moved and never freed while the arena lives.
// Chunks grow geometrically from kFirstChunkBytes to the chunk size given, so
// that a short process (most record a few stacks) maps 64 KiB, not a whole
// 1 MiB chunk, and a table that grows gets its next chunk mapped ahead of
// need by Prepare() (gpuwatch's thread), off the allocating threads;
// ids 1..max_records map to records through a fixed array whose entries are
// published with a release store. So Get(id) is lock-free, allocation-free
// and async-signal-safe, and what it returns stays valid while other threads
// allocate. Growth is bounded by the constructor's caps; once a cap is
// reached or an mmap fails, the arena is full() and allocates nothing more.
//
// fork(): the owner takes the arena's lock in its pthread_atfork prepare
// handler (LockForFork) and releases it in the parent and the child.
#ifndef GPUWATCH_LIBGPUWATCH_BASE_ARENA_H_
#define GPUWATCH_LIBGPUWATCH_BASE_ARENA_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "libgpuwatch/base/mutex.h"

namespace gpuwatch {

// Anonymous zero-filled memory, backed by pages only when touched
// (MAP_NORESERVE: an index sized for a cap does not count against the commit
// limit before it is used). nullptr on failure.
void* MapZeroed(size_t bytes);
void Unmap(void* mem, size_t bytes);

// The slots of an interned table's hash index, zeroed (empty): enough of
// `slot_size` bytes for `max_entries` at a load of at most 1/2, which keeps
// probes short and leaves an empty slot for every insert (ids are capped).
// *mask is the slot count minus one (a power of two), *bytes the mapping's
// size. nullptr when it cannot be mapped.
void* MapSlots(uint32_t max_entries, size_t slot_size, size_t* mask, size_t* bytes);
// `num_slots` zeroed slots of `slot_size` bytes, as MapSlots maps them; *bytes
// the mapping's size. nullptr when it cannot be mapped.
void* MapSlotArray(size_t num_slots, size_t slot_size, size_t* bytes);

// The padding is deliberate: what an allocation writes shares one cache line.
class RecordArena {  // NOLINT(clang-analyzer-optin.performance.Padding)
 public:
  // The largest chunk of the stack and Python frame tables.
  static constexpr size_t kDefaultChunkBytes = size_t{1} << 20;
  // The first chunk's size (or the chunk size, if smaller); each next chunk
  // doubles, up to the chunk size.
  static constexpr size_t kFirstChunkBytes = size_t{64} << 10;

  // At most `max_records` records (ids 1..max_records) in at most
  // `max_bytes` of chunks of at most `chunk_bytes` (both rounded up to whole
  // pages; `max_bytes` to whole chunks of `chunk_bytes`).
  // `what` names the contents in the one warning a failed mmap prints
  // ("stacks"). A failed mapping of the id array leaves a full arena; never
  // throws.
  RecordArena(uint32_t max_records, size_t max_bytes, size_t chunk_bytes, const char* what);
  ~RecordArena();
  RecordArena(const RecordArena&) = delete;
  RecordArena& operator=(const RecordArena&) = delete;

  // The next id and `bytes` of zeroed room, 8-byte aligned, for a record that
  // becomes visible only with Publish(). nullptr when a cap is reached, the
  // record is larger than a chunk, or an mmap fails (the arena is then full).
  // Thread-safe (takes the arena's lock); may mmap a chunk.
  void* Allocate(size_t bytes, uint32_t* id);
  // Makes `record` (from Allocate) what Get(id) returns, with release order:
  // a reader that sees it sees what was written into it before.
  void Publish(uint32_t id, const void* record);
  // The record of `id`, or nullptr for 0, an unknown id or one not published
  // yet. Thread-safe, lock-free, async-signal-safe.
  const void* Get(uint32_t id) const;

  // Maps the first chunk now, so that the first Allocate() does not; later,
  // once the last chunk is half used, the next one, which Allocate() takes
  // when that one is full (attach calls it for the stack table, then
  // gpuwatch's thread on each of its rounds). The mmap runs outside the
  // arena's lock: allocating threads do not wait for it. Thread-safe.
  void Prepare();

  void LockForFork() { mu_.lock(); }
  void UnlockAfterFork() { mu_.unlock(); }

  // False when nothing can ever be allocated (the id array is not mapped).
  bool usable() const { return by_id_ != nullptr; }
  bool full() const { return full_.load(std::memory_order_relaxed); }
  // Ids handed out; the last few may still be publishing. Thread-safe.
  uint32_t size() const { return next_id_.load(std::memory_order_acquire) - 1; }
  size_t bytes_used() const { return bytes_used_.load(std::memory_order_relaxed); }
  uint32_t max_records() const { return max_records_; }
  size_t max_bytes() const { return max_bytes_; }
  // Bytes of chunks mapped (the spare one included). Thread-safe.
  size_t bytes_mapped() const { return bytes_mapped_.load(std::memory_order_relaxed); }

 private:
  const uint32_t max_records_;
  const char* const what_;
  size_t chunk_bytes_ = 0;  // the largest chunk
  size_t first_chunk_bytes_ = 0;
  size_t max_bytes_ = 0;
  size_t max_chunks_ = 0;  // the length of chunks_
  // by_id_[id] -> record; accessed only through std::atomic_ref, written once.
  const void** by_id_ = nullptr;
  size_t by_id_bytes_ = 0;
  // Chunk pointers, max_chunks_ of them; written under mu_.
  char** chunks_ = nullptr;
  size_t chunks_bytes_ = 0;

  // Read on every miss of the tables above, written once: off the line below.
  alignas(64) std::atomic<bool> full_{false};

  alignas(64) Mutex mu_;
  std::atomic<uint32_t> next_id_{1};
  std::atomic<size_t> bytes_used_{0};
  std::atomic<size_t> bytes_mapped_{0};
  uint32_t num_chunks_ = 0;      // guarded by mu_
  uint32_t chunk_offset_ = 0;    // guarded by mu_; bump offset in the last chunk
  size_t last_chunk_bytes_ = 0;  // guarded by mu_: the last chunk's size
  // The next chunk, mapped ahead by Prepare(), of ChunkBytes(num_chunks_)
  // bytes; guarded by mu_.
  char* spare_ = nullptr;
  bool preparing_ = false;  // guarded by mu_: a Prepare() maps outside the lock

  // The size of chunk `index` (geometric, capped at chunk_bytes_; 0 past
  // max_bytes_).
  size_t ChunkBytes(size_t index) const;
  // Whether there is a chunk `num_chunks_`. Caller holds mu_.
  bool RoomForNextChunk() const;
  // Makes `chunk` (of ChunkBytes(num_chunks_)) the last one. Caller holds mu_.
  void AddChunk(char* chunk);
};

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_BASE_ARENA_H_
