#include "libgpuwatch/report/checkpoint.h"

namespace gpuwatch {

bool CheckpointDue(const CheckpointState& last, uint64_t now, uint64_t events, uint64_t peak,
                   uint64_t interval_ns) {
  if (events == 0) return false;  // nothing yet (a forked child that made no call of its own)
  if (last.failures > 0) return now >= last.retry_ns;
  if (last.last_ns == 0) return true;
  const uint64_t since = now - last.last_ns;
  if (since < kCheckpointCostFactor * last.last_cost_ns) return false;
  if (peak > last.peak) return true;
  return since >= interval_ns && events != last.events;
}

void CheckpointFailed(CheckpointState* state, uint64_t now) {
  const uint32_t doublings = state->failures < 6 ? state->failures : 6;  // 2^6 s > the cap
  const uint64_t wait = kCheckpointRetryMinNs << doublings;
  state->retry_ns = now + (wait < kCheckpointRetryMaxNs ? wait : kCheckpointRetryMaxNs);
  ++state->failures;
}

}  // namespace gpuwatch
