// When gpuwatch's background thread refreshes the checkpoint report.
//
// A checkpoint is the whole report, so its cost grows with the process: a
// few milliseconds for a training job's thousands of live allocations, about
// a second of CPU for a million of them over ten thousand sites. Which sites
// read the same is kept from one report to the next (the reports' kept
// SiteResolver), so a site is symbolized whole once, and afterwards only
// while a report lists it: 10,000 sites with nothing live cost 21 ms a
// checkpoint rather than 60 (docs/BENCHMARKS.md). The rule
// keeps checkpoints at a bounded share of one core whatever their size:
// after a checkpoint that took C of CPU, the next waits at least
// kCheckpointCostFactor x C, on top of the configured interval.
#ifndef GPUWATCH_LIBGPUWATCH_REPORT_CHECKPOINT_H_
#define GPUWATCH_LIBGPUWATCH_REPORT_CHECKPOINT_H_

#include <cstdint>

namespace gpuwatch {

// Checkpoints take at most 1/20 (5%) of one core.
inline constexpr uint64_t kCheckpointCostFactor = 20;

struct CheckpointState {
  uint64_t last_ns = 0;       // when the last one was written; 0 = never
  uint64_t last_cost_ns = 0;  // the CPU time it took
  uint64_t events = 0;        // the tracker's event count then
  uint64_t peak = 0;          // the device peak then
  uint32_t failures = 0;      // writes failed in a row since the last one that worked
  uint64_t retry_ns = 0;      // while failing: no try before this
};

// While checkpoints fail (a full disk, a directory gone), tries are spaced
// 1 s, 2 s, 4 s, ... apart, at most kCheckpointRetryMaxNs.
inline constexpr uint64_t kCheckpointRetryMinNs = 1000000000ULL;
inline constexpr uint64_t kCheckpointRetryMaxNs = 60 * kCheckpointRetryMinNs;

// A checkpoint could not be written at `now`: the next try waits.
void CheckpointFailed(CheckpointState* state, uint64_t now);

// True when a checkpoint is due at `now`, given the tracker's event count and
// device peak: never before the first event, nor sooner than
// kCheckpointCostFactor times the last one's cost after it; then at a new
// peak, or once `interval_ns` has passed and something changed. While
// writes fail, at the retry time (CheckpointFailed).
bool CheckpointDue(const CheckpointState& last, uint64_t now, uint64_t events, uint64_t peak,
                   uint64_t interval_ns);

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_REPORT_CHECKPOINT_H_
