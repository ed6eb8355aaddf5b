// What /proc/PID/stat says of a process: its state letter, its parent, and
// when it started (clock ticks since boot, which with the pid names one
// process: a pid that is reused gets another start time). The agent records
// its parent at attach with it; `gpuwatch top` and `gpuwatch exporter` read
// it to say whether a process is stopped or orphaned (docs/live.md).
//
// Thread-safety: any thread. No allocation.
#ifndef GPUWATCH_LIBGPUWATCH_BASE_PROC_STAT_H_
#define GPUWATCH_LIBGPUWATCH_BASE_PROC_STAT_H_

#include <sys/types.h>

#include <cstdint>

namespace gpuwatch {

struct ProcStat {
  bool known = false;    // false: no such process, or its stat could not be read
  bool missing = false;  // there is no such file (the process or task is gone)
  char state = 0;        // R, S, D, T (stopped), t (stopped by a tracer), Z, X, ...
  pid_t ppid = 0;
  unsigned long flags = 0;   // field 9: PF_EXITING (0x4), ...
  uint64_t start_ticks = 0;  // field 22, starttime
};

ProcStat ReadProcStat(pid_t pid);
// The same of a stat file: /proc/PID/task/TID/stat.
ProcStat ReadProcStatFile(const char* path);

// A stopped process: by a signal (T) or by a tracer (t).
inline bool Stopped(const ProcStat& s) { return s.known && (s.state == 'T' || s.state == 't'); }

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_BASE_PROC_STAT_H_
