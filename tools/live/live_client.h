// Reading the live state of the processes under gpuwatch on this machine
// (interpose/agent/live.h serves it; docs/live.md has the protocol), for `gpuwatch
// top` and `gpuwatch exporter`.
#ifndef GPUWATCH_TOOLS_LIVE_LIVE_CLIENT_H_
#define GPUWATCH_TOOLS_LIVE_LIVE_CLIENT_H_

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "libgpuwatch/base/status_page.h"
#include "tools/live/live_answer.h"

namespace gpuwatch::tools {

struct LiveProcess {
  pid_t pid = 0;  // the entry's name: "<pid>.sock"
  LiveState state;
  // Its status page (status_page.h), when it has one: its threads' CUDA
  // calls in progress.
  std::optional<StatusView> status;
  // False for a process whose socket did not answer (hung, stopped) and
  // whose page says it is inside a CUDA call: `state` then holds only its
  // command line, its host and its device memory by device, from the page.
  bool answered = true;
};

struct LiveScan {
  std::vector<LiveProcess> processes;  // by pid
  // One line per entry that answered badly (a process that stopped answering,
  // an answer that is not a live state, one served by another user), or the
  // one line that says why the directory was not read: the rest are still
  // read. Printable (live_answer.h): no terminal control in them.
  std::vector<std::string> problems;
  // Entries removed from the directory: of processes that no longer exist,
  // and names nobody has listened on for kStaleEntrySeconds.
  size_t cleaned = 0;
};

// An entry nobody listens on, of a pid that exists (a process that exec'ed
// into a program without gpuwatch, a file that is not a socket), is removed
// once its name is this old: a process binds and listens at once.
inline constexpr int kStaleEntrySeconds = 10;

// The live directory to read: `dir` when not empty, else the environment's
// (LiveDirFromEnvironment). False with *problem when it cannot be read
// safely (a symlink, another user's, not a directory); a directory that does
// not exist yet is fine (no process has made it).
bool ResolveLiveDir(const std::string& dir, std::string* resolved, std::string* problem);

// Asks every process in `dir` at once for its state with `top` sites, and
// waits `timeout_ms` at most for all of them. The directory is checked again
// at each scan (PrepareLiveDir: no symlink, this user's, private): one that
// is unsafe now is one problem and no process; one that does not exist, none.
// A process whose socket was made by another uid (SO_PEERCRED) is a problem,
// not read. Each answer is read into a LiveState (ParseLiveAnswer) on its
// own: a bad one is one problem and hides no other. Each process's status
// page is read too; one that did not answer in time but is inside a CUDA
// call by its page is listed from the page (answered false) as well as
// named in a problem.
LiveScan ScanLive(const std::string& dir, size_t top, int timeout_ms);

}  // namespace gpuwatch::tools

#endif  // GPUWATCH_TOOLS_LIVE_LIVE_CLIENT_H_
