// Reading the live state of the processes under gpuwatch on this machine
// (interpose/live.h serves it; docs/live.md has the protocol), for `gpuwatch
// top` and `gpuwatch exporter`.
#ifndef GPUWATCH_TOOLS_LIVE_CLIENT_H_
#define GPUWATCH_TOOLS_LIVE_CLIENT_H_

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace gpuwatch::tools {

struct LiveProcess {
  pid_t pid = 0;
  nlohmann::json state;  // schema "gpuwatch-live"
};

struct LiveScan {
  std::vector<LiveProcess> processes;  // by pid
  // One line per entry that answered badly (a process that stopped answering,
  // a state that is not JSON): the rest are still read.
  std::vector<std::string> problems;
  // Entries of processes that no longer exist, removed from the directory.
  size_t cleaned = 0;
};

// The live directory to read: `dir` when not empty, else the environment's
// (LiveDirFromEnvironment). False with *problem when it cannot be read
// safely (a symlink, another user's, not a directory); a directory that does
// not exist yet is fine (no process has made it).
bool ResolveLiveDir(const std::string& dir, std::string* resolved, std::string* problem);

// Asks every process in `dir` at once for its state with `top` sites, and
// waits `timeout_ms` at most for all of them.
LiveScan ScanLive(const std::string& dir, size_t top, int timeout_ms);

}  // namespace gpuwatch::tools

#endif  // GPUWATCH_TOOLS_LIVE_CLIENT_H_
