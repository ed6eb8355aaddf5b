// What a reader knows of a process that does not answer its socket (stopped
// by SIGSTOP or a debugger, hung, too busy): `gpuwatch top` and `gpuwatch
// exporter` still show it, with what it holds as far as is known, and say
// where that came from and how old it is. The sources, in this order:
//   "answer"      what it answered on an earlier scan of this reader (the
//                 interactive top, the exporter between scrapes), kept while
//                 its entry is listed and its pid is the same process
//                 (its start time in /proc);
//   "checkpoint"  its last checkpoint report (GPUWATCH_CHECKPOINT_SECONDS),
//                 at GPUWATCH_OUTPUT as its environment and working
//                 directory give it (/proc/PID/environ, /proc/PID/cwd),
//                 when that report is this pid's.
//   "status page" else what its status page (status_page.h) says it holds
//                 (device memory by device only), written once a second by
//                 its gpuwatch thread until it stopped.
#ifndef GPUWATCH_TOOLS_LIVE_LIVE_KNOWN_H_
#define GPUWATCH_TOOLS_LIVE_LIVE_KNOWN_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>

#include "tools/live/live_client.h"

namespace gpuwatch::tools {

class LiveKnown {
 public:
  // Notes each answer of `scan`, forgets the processes no longer in it, and
  // fills each silent process's state, known_from and known_age_ms from what
  // is known of it. `now_unix_ms`: the time of the scan.
  void Update(LiveScan* scan, uint64_t now_unix_ms);

 private:
  struct Answer {
    uint64_t start_ticks = 0;  // the process's, from /proc: a reused pid is another
    uint64_t at_unix_ms = 0;
    LiveState state;
  };
  struct Checkpoint {
    std::string path;
    int64_t mtime_ns = 0;
    LiveState state;
  };
  std::map<pid_t, Answer> answers_;
  std::map<pid_t, Checkpoint> checkpoints_;  // the last read, so that it is read once
};

// The path of the main report (where checkpoints go) of process `pid`, from
// its environment and working directory; "" when they cannot be read.
std::string ReportPathOf(pid_t pid);

}  // namespace gpuwatch::tools

#endif  // GPUWATCH_TOOLS_LIVE_LIVE_KNOWN_H_
