// The clocks gpuwatch reads: monotonic time for timers and rate limits, the
// calling thread's CPU time for what a report costs, and a tick counter for
// the launch path (one instruction where the CPU has one).
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

// A counter that grows at a constant rate: the time-stamp counter (x86-64),
// the virtual counter (AArch64), else monotonic nanoseconds. Its rate is
// unknown: measure it against MonotonicNs() over an interval to convert.
inline uint64_t Ticks() {
#if defined(__x86_64__)
  return __builtin_ia32_rdtsc();
#elif defined(__aarch64__)
  uint64_t ticks = 0;
  asm volatile("mrs %0, cntvct_el0" : "=r"(ticks));
  return ticks;
#else
  return MonotonicNs();
#endif
}
// Whether Ticks() counts nanoseconds (a CPU without a counter read above).
inline constexpr bool kTicksAreNs =
#if defined(__x86_64__) || defined(__aarch64__)
    false;
#else
    true;
#endif

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_BASE_CLOCK_H_
