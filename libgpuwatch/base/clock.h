// The clocks gpuwatch reads: monotonic time for timers and rate limits, and
// the calling thread's CPU time for what a report costs.
#ifndef GPUWATCH_LIBGPUWATCH_BASE_CLOCK_H_
#define GPUWATCH_LIBGPUWATCH_BASE_CLOCK_H_

#include <time.h>

#include <cstdint>

namespace gpuwatch {

inline uint64_t ClockNs(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

inline uint64_t MonotonicNs() { return ClockNs(CLOCK_MONOTONIC); }
inline uint64_t ThreadCpuNs() { return ClockNs(CLOCK_THREAD_CPUTIME_ID); }

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_BASE_CLOCK_H_
