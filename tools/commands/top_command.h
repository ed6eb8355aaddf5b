// `gpuwatch top`: a live view of the processes under gpuwatch on this
// machine (tools/live/live_client.h reads them), refreshed every second in the
// manner of top and nvtop, or one plain-text frame with --once.
#ifndef GPUWATCH_TOOLS_COMMANDS_TOP_COMMAND_H_
#define GPUWATCH_TOOLS_COMMANDS_TOP_COMMAND_H_

#include <sys/types.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "tools/live/live_client.h"

namespace gpuwatch::tools {

struct TopOptions {
  std::string dir;  // "" = the environment's live directory
  bool once = false;
  pid_t pid = 0;              // the process selected; 0 = the first listed
  int sites = 10;             // --once: sites of the selected process
  std::string sort = "live";  // live | growth | peak | pid
  int width = 80;             // --once
  // How long a scan waits for the processes' answers; 0: 500 ms, 2 s with
  // --once.
  int timeout_ms = 0;
  // --idle-after: no CUDA activity for this long is idle; 0: GPUWATCH_IDLE_SECONDS,
  // else 600 (live_holders.h).
  uint64_t idle_after_s = 0;
};

// Returns 0, or 2 with one line on stderr when the live directory cannot be
// read safely or the terminal cannot be used.
int TopCommand(const TopOptions& options, FILE* out);

// What a frame shows; the interactive view changes it with keys.
struct TopView {
  std::string sort = "live";
  pid_t selected = 0;  // 0: the first listed
  int width = 80;
  int height = 0;     // 0: as many lines as there is to show (--once)
  int sites = 10;     // with height 0
  bool utf8 = false;  // the sparkline in block characters, else ASCII
  std::string dir;
  std::string clock;                         // "12:18:44", shown in the first line
  uint64_t idle_after_ns = 600000000000ULL;  // the STATE column's idle
};

// One frame, a line each (no line ends, no terminal codes), at most
// view.width columns wide, and view.height lines when it is not 0. The
// processes sorted as view.sort says, the selected one marked '>'; the
// selected process's sites below.
std::vector<std::string> RenderTopFrame(const LiveScan& scan, const TopView& view);

// The processes in the order the frame lists them: those that answered and
// those that did not (LiveScan::silent, with what is known of them).
std::vector<const LiveProcess*> SortedProcesses(const LiveScan& scan, const std::string& sort);

}  // namespace gpuwatch::tools

#endif  // GPUWATCH_TOOLS_COMMANDS_TOP_COMMAND_H_
