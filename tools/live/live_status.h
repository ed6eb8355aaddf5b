// What the readers take of a process's status page (libgpuwatch/base/
// status_page.h) and of /proc: `gpuwatch why`, and `top` and the exporter,
// which read the page of every process they list and of those whose socket
// does not answer.
#ifndef GPUWATCH_TOOLS_LIVE_LIVE_STATUS_H_
#define GPUWATCH_TOOLS_LIVE_LIVE_STATUS_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "libgpuwatch/base/status_page.h"

namespace gpuwatch::tools {

// now - then, 0 when then is later.
inline uint64_t StatusSince(uint64_t then_ns, uint64_t now_ns) {
  return now_ns > then_ns ? now_ns - then_ns : 0;
}

// One thread's whereabouts: "in cudaMemcpy for 12m 3s at train.py:88", or
// "no CUDA call in progress". Printable.
std::string ThreadWhereabouts(const StatusThreadView& thread, uint64_t now_ns);

// The process's longest call in progress when it has lasted `min_ns` at
// least, as top shows it: "in cudaMemcpy 12m 3s at train.py:88"; "" when
// none has.
std::string CallInProgressText(const StatusView& view, uint64_t min_ns);

// /proc/PID/stat's state letter ("" when the process is gone) and
// /proc/PID/cmdline's arguments.
std::string ProcessState(pid_t pid);
std::vector<std::string> ProcessCommand(pid_t pid);

}  // namespace gpuwatch::tools

#endif  // GPUWATCH_TOOLS_LIVE_LIVE_STATUS_H_
