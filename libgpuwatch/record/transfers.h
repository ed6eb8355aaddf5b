// Host<->device copies attributed to the call sites that issued them.
//
// A copy is seen twice: at the API call (its stack, bytes, direction, sync or
// async; a correlation id) and later in a CUPTI MEMCPY activity record (host
// memory kind, start and end on the GPU). OnCopyCall() registers the call
// under its correlation id; OnCopyRecord() joins the record to it and
// aggregates. A copy is counted once, from its call: calls whose records never
// come (activity unavailable, records dropped or not joinable) are aggregated
// with what the call alone says (Settle(), and in every Snapshot()), and a
// record that joins no call is counted in unmatched_records, never as a copy.
// The work of a graph's memcpy nodes is registered at each launch
// (OnGraphCopy); their records carry the node's id.
//
// Thread-safety: every method may be called concurrently; one mutex guards the
// tables. Copies cost microseconds in CUDA itself, so a short lock is fine;
// a copy allocates nothing once its site has been seen (the pending calls sit
// in an open-addressing table that keeps its capacity).
#ifndef GPUWATCH_LIBGPUWATCH_RECORD_TRANSFERS_H_
#define GPUWATCH_LIBGPUWATCH_RECORD_TRANSFERS_H_

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "libgpuwatch/base/address_map.h"
#include "libgpuwatch/base/mutex.h"
#include "libgpuwatch/record/event.h"

namespace gpuwatch {

// The host side of a copy, from the activity record's srcKind/dstKind.
enum class HostKind : uint8_t {
  kUnknown = 0,  // no activity record (or direction unknown)
  kPageable,
  kPinned,
  kManaged,
  kDevice,  // device-to-device and peer copies have no host side
};
inline constexpr int kNumHostKinds = 5;
const char* HostKindName(HostKind kind);

// Thresholds of the findings; docs/report-format.md describes them.
inline constexpr uint64_t kSmallCopyBytes = uint64_t{64} * 1024;
inline constexpr uint64_t kSmallCopyStormCount = 100;
inline constexpr uint64_t kSyncD2HLoopCount = 10;
inline constexpr uint64_t kLargeCopyBytes = 1 << 20;
inline constexpr double kSlowBandwidthFraction = 0.25;
// Copies smaller than this are latency-bound: their bandwidth says little.
inline constexpr uint64_t kBandwidthMinBytes = uint64_t{64} * 1024;
inline constexpr int kHistogramBuckets = 48;  // bucket b: [2^b, 2^(b+1)) bytes; 0 holds 0 and 1

struct CopyCall {
  uint32_t correlation = 0;
  uint32_t stack_id = 0;
  uint64_t bytes = 0;
  CopyKind kind = CopyKind::kUnknown;
  // The host side as gpuwatch's own tables of pinned and registered memory
  // see it at the call; a record's kind replaces it.
  HostKind host = HostKind::kUnknown;
  bool async = false;
  uint32_t records = 1;  // activity records expected (a batch has one per copy)
};

struct CopyRecord {
  uint32_t correlation = 0;          // the driver call's
  uint32_t runtime_correlation = 0;  // the runtime call's, 0 when none
  uint64_t graph_node = 0;           // the graph node that made the copy, 0 when none
  uint64_t bytes = 0;
  CopyKind kind = CopyKind::kUnknown;
  HostKind host = HostKind::kUnknown;
  bool async = false;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
};

struct TransferStats {
  uint64_t count = 0;
  uint64_t bytes = 0;
  uint64_t timed_count = 0;  // copies with an activity record
  uint64_t timed_bytes = 0;
  uint64_t duration_ns = 0;
  uint64_t bw_bytes = 0;  // bytes and time of copies >= kBandwidthMinBytes
  uint64_t bw_ns = 0;
};

struct SiteTransfers {
  TransferStats all;
  std::array<TransferStats, kNumCopyKinds> by_kind{};
  std::array<TransferStats, kNumHostKinds> by_host{};
  uint64_t sync_count = 0;
  uint64_t async_count = 0;
  uint64_t small_count = 0;  // copies < kSmallCopyBytes
  uint64_t small_bytes = 0;
  uint64_t sync_d2h_count = 0;
  // Pageable and (async or large): [0] from pageable memory (host to device),
  // [1] to pageable memory (device to host).
  std::array<uint64_t, 2> pageable_flagged_count{};
  std::array<uint64_t, 2> pageable_flagged_bytes{};
  std::array<uint64_t, kHistogramBuckets> histogram{};
};

struct TransfersSnapshot {
  // [direction][host kind]
  std::array<std::array<TransferStats, kNumHostKinds>, kNumCopyKinds> totals{};
  std::vector<std::pair<uint32_t, SiteTransfers>> sites;
  // Best bandwidth (bytes/ns = GB/s) of a single copy >= kBandwidthMinBytes,
  // per direction; 0 when none.
  std::array<double, kNumCopyKinds> best_gbps{};
  // Records that joined no call (their copy is counted from its call, untimed).
  uint64_t unmatched_records = 0;
  uint64_t pending_dropped = 0;  // calls not joined: the pending table was full
};

int HistogramBucket(uint64_t bytes);

// Adds `from` into `into` (sites that the report shows as one).
void MergeInto(SiteTransfers* into, const SiteTransfers& from);

// Achieved bandwidth in GB/s (bytes per ns); 0 when nothing was timed.
double Gbps(uint64_t bytes, uint64_t ns);

// Something about a site's copies worth changing, with the figures behind it.
struct TransferFinding {
  std::string type;  // "pageable", "small_copies", "sync_d2h_loop", "slow_copies"
  uint32_t site = 0;
  uint64_t count = 0;
  uint64_t bytes = 0;
  double gbps = 0;       // slow_copies: the site's bandwidth
  double best_gbps = 0;  // slow_copies: the best of its direction in this run
  CopyKind direction = CopyKind::kUnknown;
  std::string advice;
};

// The findings, most costly first (by bytes, then count). `sites` as merged
// for the report; `best_gbps` from TransfersSnapshot.
std::vector<TransferFinding> FindTransferIssues(
    const std::vector<std::pair<uint32_t, SiteTransfers>>& sites,
    const std::array<double, kNumCopyKinds>& best_gbps);

class Transfers {
 public:
  // Registers a copy call. Call it before the copy can complete (at API
  // ENTER), so that its record always finds it. `activity` false: no records
  // will come; the call is aggregated at once.
  void OnCopyCall(const CopyCall& call, bool activity);
  // The call failed, or made a graph node instead of copying: forget it.
  void OnCopyFailed(uint32_t correlation);
  // One memcpy node's copy at a graph launch (the launch's correlation id).
  void OnGraphCopy(uint32_t correlation, uint64_t node, const CopyCall& call, bool activity);
  // The launch failed: forget the copies OnGraphCopy registered for it.
  void OnGraphLaunchFailed(uint32_t correlation, uint64_t node);
  // Returns the stack id of the call the record joined (0 when none).
  uint32_t OnCopyRecord(const CopyRecord& record);
  // Aggregates the calls still waiting for a record with what the calls say.
  // Call after flushing the activity buffers at exit.
  void Settle();
  // Includes the calls still waiting for a record, counted as Settle() would.
  TransfersSnapshot Snapshot() const;
  // Snapshot() without the sites: the totals, with the calls still waiting
  // for a record counted from what they say. For the live state.
  TransfersSnapshot Totals() const;
  // For pthread_atfork (prepare; parent and child).
  void LockForFork() { mu_.lock(); }
  void UnlockAfterFork() { mu_.unlock(); }

  // Calls waiting for their records at most; a call beyond is counted at once
  // from what it says (untimed) and in pending_dropped.
  static constexpr size_t kMaxPending = 1 << 20;

 private:
  using SiteMap = std::unordered_map<uint32_t, SiteTransfers>;
  static void Aggregate(uint32_t stack_id, const CopyRecord& record, bool timed, bool async,
                        TransfersSnapshot* totals, SiteMap* sites);
  // A call whose record will not come, counted with what the call says.
  static void AggregateUntimed(const CopyCall& call, TransfersSnapshot* totals, SiteMap* sites);
  void Register(uint64_t key, const CopyCall& call) /* requires mu_ */;
  uint32_t Join(uint64_t key, const CopyRecord& record) /* requires mu_ */;

  mutable Mutex mu_;
  // Keys: a call's correlation id + 1 (the table's keys are non-zero); a
  // graph node's copy at a launch: (correlation id + 1) << 32 | the node id's
  // low 32 bits, which never collides with a call's key.
  static uint64_t PendingKey(uint32_t correlation) { return uint64_t{correlation} + 1; }
  static uint64_t GraphKey(uint32_t correlation, uint64_t node) {
    return (uint64_t{correlation} + 1) << 32 | (node & 0xffffffffu);
  }

  AddressMap<CopyCall> pending_;                       // guarded by mu_
  std::unordered_map<uint32_t, SiteTransfers> sites_;  // guarded by mu_
  TransfersSnapshot totals_;  // totals, best, counters; sites unused; guarded by mu_
};

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_RECORD_TRANSFERS_H_
