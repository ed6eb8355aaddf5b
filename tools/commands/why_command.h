// `gpuwatch why PID`: what a process under gpuwatch is doing now, read from
// its status page (libgpuwatch/base/status_page.h), so that it answers for a
// process hung in a CUDA call or stopped as well as for a healthy one: what
// it holds, where each thread is, its last completed call and its last
// checkpoint (docs/live.md, "gpuwatch why").
#ifndef GPUWATCH_TOOLS_COMMANDS_WHY_COMMAND_H_
#define GPUWATCH_TOOLS_COMMANDS_WHY_COMMAND_H_

#include <sys/types.h>

#include <cstdio>
#include <string>
#include <vector>

#include "libgpuwatch/base/status_page.h"

namespace gpuwatch::tools {

struct WhyOptions {
  pid_t pid = 0;
  std::string dir;  // "" = the environment's live directory
};

// 0 when the page was read; 1 when gpuwatch is not in the process (no page)
// or the page cannot be read (one line on stderr says which); 2 when the
// live directory cannot be read safely.
int WhyCommand(const WhyOptions& options, FILE* out);

// The lines `why` prints for `view`; `state` is /proc's one-letter process
// state ("" when unknown), `command` its command line.
std::vector<std::string> RenderWhy(const StatusView& view, const std::string& state,
                                   const std::string& command);

}  // namespace gpuwatch::tools

#endif  // GPUWATCH_TOOLS_COMMANDS_WHY_COMMAND_H_
