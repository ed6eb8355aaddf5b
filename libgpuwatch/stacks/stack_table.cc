#include "libgpuwatch/stacks/stack_table.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <mutex>

#include "libgpuwatch/base/log.h"
#include "libgpuwatch/base/thread_block.h"

namespace gpuwatch {

namespace {

// Four independent xor-multiply lanes (so the CPU overlaps them; three
// instructions a pc), then a murmur3 finaliser. Each step is a bijection of
// its lane for a given pc, so no pc's bits are lost; return addresses share
// their high bits, so the low bits must reach the whole word, which the
// finaliser does. Not cryptographic: a collision only costs a pc comparison.
inline uint64_t HashPcs(const uintptr_t* pcs, int n) {
  constexpr uint64_t kMulA = 0x9E3779B97F4A7C15ULL;
  constexpr uint64_t kMulB = 0xC2B2AE3D27D4EB4FULL;
  uint64_t a = static_cast<uint64_t>(n) * kMulA;
  uint64_t b = 0x2545F4914F6CDD1DULL;
  uint64_t c = 0x165667B19E3779F9ULL;
  uint64_t d = 0x27D4EB2F165667C5ULL;
  int i = 0;
  for (; i + 3 < n; i += 4) {
    a = (a ^ pcs[i]) * kMulA;
    b = (b ^ pcs[i + 1]) * kMulB;
    c = (c ^ pcs[i + 2]) * kMulA;
    d = (d ^ pcs[i + 3]) * kMulB;
  }
  for (; i < n; ++i) a = (a ^ pcs[i]) * kMulB;
  uint64_t h = a ^ std::rotl(b, 17) ^ std::rotl(c, 31) ^ std::rotl(d, 47);
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDULL;
  h ^= h >> 33;
  h *= 0xC4CEB9FE1A85EC53ULL;
  h ^= h >> 33;
  return h;
}

// ---- Each thread's recent stacks ---------------------------------------------
//
// A thread that allocates in a loop interns the same few stacks over and
// over. Each thread keeps the stacks it interned last, with their ids, in a
// two-way set-associative cache of kRecentSets sets picked by five of the
// stack's pcs (a set keeps its two most recently used stacks); an entry gives
// its id only to a stack equal in every pc to the one it names, in the same
// table. So a stack seen again costs a comparison with its record (in cache
// when it is a recent one): no hash of every pc, and none of the table's
// shared slots (lines other threads write). An entry points at the table's
// record, which never moves while the table lives, so a miss costs a few
// stores, not a copy of the stack.
constexpr int kRecentBits = 6;
constexpr int kRecentSets = 1 << kRecentBits;
struct RecentStack {
  uint64_t table;  // the table's serial (StackTable::serial_); 0: empty
  uint64_t key;    // RecentKey of the stack: compared before its record is read
  const uintptr_t* pcs;
  uint32_t id;
  uint32_t n;
};
struct RecentStacks {
  uint64_t hits;                   // stacks found here (tests)
  uint8_t last_used[kRecentSets];  // per set, the way used last
  RecentStack entry[kRecentSets][2];
};

// 4,168 bytes (two pages) a thread, mapped on the thread's first Intern
// (base/thread_block.h).
static_assert(sizeof(RecentStacks) == 4168, "the comment above says what a thread maps");
RecentStacks* ThreadRecent() { return ThreadBlock<RecentStacks>::Get(); }

// Serials of tables: an entry of a table that was destroyed, with another
// made at its address, is not taken for the new one's.
constinit std::atomic<uint64_t> g_table_serials{0};

// A key of five of the pcs of a stack of n >= 1 pcs; its top bits pick the set.
inline uint64_t RecentKey(const uintptr_t* pcs, int n) {
  const auto un = static_cast<unsigned>(n);
  const uint64_t key = pcs[0] ^ std::rotl(pcs[un / 4], 13) ^ std::rotl(pcs[un / 2], 26) ^
                       std::rotl(pcs[3 * un / 4], 39) ^ std::rotl(pcs[un - 1], 52) ^ un;
  return key * 0x9E3779B97F4A7C15ULL;
}

// Whether `entry` is the stack pcs[0, n) of the table `table` with key `key`.
// The record is read only when everything else matches: an entry of another
// stack costs no read of that stack's record (a cache miss where there are
// many).
inline bool Holds(const RecentStack& entry, uint64_t table, uint64_t key, const uintptr_t* pcs,
                  int n) {
  return entry.key == key && entry.table == table && entry.n == static_cast<uint32_t>(n) &&
         std::memcmp(entry.pcs, pcs, static_cast<size_t>(n) * sizeof(uintptr_t)) == 0;
}

// The first index: 32 KiB, enough for 2,048 stacks.
constexpr size_t kFirstIndexSlots = 4096;

inline std::atomic_ref<uint64_t> SlotRef(uint64_t* slots, size_t i) {
  return std::atomic_ref<uint64_t>(slots[i]);
}

}  // namespace

StackTable::StackTable(uint32_t max_stacks, size_t max_bytes)
    : serial_(g_table_serials.fetch_add(1, std::memory_order_relaxed) + 1),
      arena_(max_stacks, max_bytes, kChunkBytes, "stacks") {
  if (!arena_.usable()) return;
  max_slots_ = std::bit_ceil(std::max<size_t>(size_t{2} * arena_.max_records(), 16));
  Index& first = indexes_[0];
  const size_t num_slots = std::min(kFirstIndexSlots, max_slots_);
  first.slots = static_cast<uint64_t*>(MapSlotArray(num_slots, sizeof(uint64_t), &first.bytes));
  if (first.slots == nullptr) {
    Warn("cannot map %zu bytes for the stack table; stacks will not be recorded", first.bytes);
    return;
  }
  first.mask = num_slots - 1;
  num_indexes_ = 1;
  index_.store(&first, std::memory_order_release);
}

StackTable::~StackTable() {
  for (int i = 0; i < num_indexes_; ++i) Unmap(indexes_[i].slots, indexes_[i].bytes);
}

uint32_t StackTable::Find(const Index& index, uint64_t hash, const uintptr_t* pcs, int n,
                          size_t* empty_slot) const {
  const uint64_t tag = hash >> 32;
  const size_t bytes = static_cast<size_t>(n) * sizeof(uintptr_t);
  for (size_t i = hash & index.mask;; i = (i + 1) & index.mask) {
    // Acquire pairs with the inserter's release CAS: seeing the slot means
    // seeing its by_id_ entry and the record's contents.
    const uint64_t slot = SlotRef(index.slots, i).load(std::memory_order_acquire);
    if (slot == 0) {
      *empty_slot = i;
      return 0;
    }
    if ((slot >> 32) != tag) continue;
    const auto id = static_cast<uint32_t>(slot);
    const Record* record = RecordOf(id);
    if (record->n == static_cast<uint32_t>(n) && std::memcmp(PcsOf(record), pcs, bytes) == 0) {
      return id;
    }
  }
}

void StackTable::Prepare() { arena_.Prepare(); }

uint32_t StackTable::Intern(const uintptr_t* pcs, int n) {
  if (n <= 0 || pcs == nullptr) return 0;
  n = std::min(n, kMaxFrames);
  RecentStacks* recent = ThreadRecent();
  if (recent == nullptr) return InternShared(pcs, n);
  const uint64_t key = RecentKey(pcs, n);
  const auto set = static_cast<int>(key >> (64 - kRecentBits));
  RecentStack* ways = recent->entry[set];
  for (int way = 0; way < 2; ++way) {
    if (Holds(ways[way], serial_, key, pcs, n)) {
      recent->last_used[set] = static_cast<uint8_t>(way);
      ++recent->hits;
      return ways[way].id;
    }
  }
  const uint32_t id = InternShared(pcs, n);
  // The record is published before its id is handed out: never null here.
  if (const Record* record = id != 0 ? RecordOf(id) : nullptr; record != nullptr) {
    const int way = 1 - recent->last_used[set];  // the one used less recently
    ways[way] = {serial_, key, PcsOf(record), id, static_cast<uint32_t>(n)};
    recent->last_used[set] = static_cast<uint8_t>(way);
  }
  return id;
}

uint64_t StackTable::RecentHitsOnThisThread() {
  const RecentStacks* recent = ThreadRecent();
  return recent != nullptr ? recent->hits : 0;
}

uint32_t StackTable::InternShared(const uintptr_t* pcs, int n) {
  const Index* index = index_.load(std::memory_order_acquire);
  if (index == nullptr) {
    Drop();
    return 0;
  }
  const uint64_t hash = HashPcs(pcs, n);
  size_t empty_slot = 0;
  // A miss here may be a false one: an index replaced while this probe read
  // it has its pages given back and reads empty. The re-probe below, under
  // the stripe, reads the current index.
  uint32_t id = Find(*index, hash, pcs, n, &empty_slot);
  if (id != 0) return id;
  Mutex& stripe = stripes_[(hash >> 20) % kStripes].mu;
  // New stack (or a false miss). Every thread inserting this same stack has
  // the same hash and so the same stripe: the second one waits here and then
  // finds the first one's record in the re-probe below, so a stack is stored
  // once. The index cannot be replaced while a stripe is held.
  std::unique_lock<Mutex> lock(stripe);
  for (;;) {
    index = index_.load(std::memory_order_acquire);
    id = Find(*index, hash, pcs, n, &empty_slot);
    if (id != 0) return id;
    if (arena_.full()) {
      Drop();
      return 0;
    }
    if (!IndexFull()) break;
    lock.unlock();
    const bool grown = GrowIndex();
    lock.lock();
    if (!grown && IndexFull()) {
      Drop();
      return 0;
    }
  }
  const size_t pcs_bytes = static_cast<size_t>(n) * sizeof(uintptr_t);
  auto* record = static_cast<Record*>(arena_.Allocate(sizeof(Record) + pcs_bytes, &id));
  if (record == nullptr) {
    Drop();
    return 0;
  }
  record->n = static_cast<uint32_t>(n);
  record->hash_low = static_cast<uint32_t>(hash);
  std::memcpy(PcsOf(record), pcs, pcs_bytes);
  arena_.Publish(id, record);

  // Publish. A slot can be claimed between our probe and the CAS only by an
  // insert from another stripe, i.e. with a different hash and so a
  // different stack; then keep probing. Slots never empty again, so every
  // slot between the home slot and ours stays occupied and lock-free readers
  // cannot stop short of our entry. The load factor bound guarantees an
  // empty slot exists.
  const uint64_t value = (hash & 0xFFFFFFFF00000000ULL) | id;
  for (size_t i = empty_slot;; i = (i + 1) & index->mask) {
    uint64_t expected = 0;
    if (SlotRef(index->slots, i)
            .compare_exchange_strong(expected, value, std::memory_order_release,
                                     std::memory_order_relaxed)) {
      break;
    }
  }
  return id;
}

bool StackTable::IndexFull() const {
  // Ids handed out count the inserts in flight under the other stripes (at
  // most one each), so the load stays under 1/2 + 64 slots: below 1 from the
  // first index's 4,096 slots on. The largest index holds every allowed id at
  // load 1/2.
  const Index* index = index_.load(std::memory_order_relaxed);
  const size_t slots = index->mask + 1;
  return slots < max_slots_ && (size_t{arena_.size()} + 1) * 2 > slots;
}

bool StackTable::GrowIndex() {
  for (Stripe& s : stripes_) s.mu.lock();
  bool ok = true;
  if (IndexFull() && num_indexes_ == kMaxIndexes) {
    ok = false;  // unreachable: 4,096 slots doubled 23 times pass any max_slots_
  } else if (IndexFull()) {
    const Index& old = indexes_[num_indexes_ - 1];
    size_t num_slots = (old.mask + 1) * 2;
    while (num_slots < max_slots_ && (size_t{arena_.size()} + 1) * 2 > num_slots) num_slots *= 2;
    Index& next = indexes_[num_indexes_];
    next.slots = static_cast<uint64_t*>(MapSlotArray(num_slots, sizeof(uint64_t), &next.bytes));
    if (next.slots == nullptr) {
      Warn("cannot map %zu bytes for the stack table's index; new stacks may be dropped",
           next.bytes);
      next = {};
      ok = false;
    } else {
      // No insert is in flight (every stripe is held): plain copies. A
      // slot's home in the new index needs the hash's low bits: the record's.
      next.mask = num_slots - 1;
      for (size_t i = 0; i <= old.mask; ++i) {
        const uint64_t slot = old.slots[i];
        if (slot == 0) continue;
        const uint64_t hash =
            (slot & 0xFFFFFFFF00000000ULL) | RecordOf(static_cast<uint32_t>(slot))->hash_low;
        size_t j = hash & next.mask;
        while (next.slots[j] != 0) j = (j + 1) & next.mask;
        next.slots[j] = slot;
      }
      ++num_indexes_;
      index_.store(&next, std::memory_order_release);
      // Lookups that loaded the old index may still read it: it stays
      // mapped, and reads as empty slots once its pages are given back.
      madvise(old.slots, old.bytes, MADV_DONTNEED);
    }
  }
  for (int i = kStripes - 1; i >= 0; --i) stripes_[i].mu.unlock();
  return ok;
}

// Lock order: stripe, then arena (as in Intern).
void StackTable::EnablePythonFrames() {
  if (python_frames_ == nullptr)
    python_frames_ = std::make_unique<PyFrameTable>(1u << 18, size_t{64} << 20);
}

void StackTable::LockForFork() {
  for (Stripe& stripe : stripes_) stripe.mu.lock();
  arena_.LockForFork();
  if (python_frames_ != nullptr) python_frames_->LockForFork();
}

void StackTable::UnlockAfterFork() {
  if (python_frames_ != nullptr) python_frames_->UnlockAfterFork();
  arena_.UnlockAfterFork();
  for (Stripe& stripe : stripes_) stripe.mu.unlock();
}

std::span<const uintptr_t> StackTable::Get(uint32_t id) const {
  const Record* record = RecordOf(id);
  if (record == nullptr) return {};
  return {PcsOf(record), record->n};
}

}  // namespace gpuwatch
