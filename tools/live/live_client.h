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

#include "libgpuwatch/base/proc_stat.h"
#include "libgpuwatch/base/status_page.h"
#include "tools/live/live_answer.h"

namespace gpuwatch::tools {

struct LiveProcess {
  // The entry's name, "<pid>.sock"; in the node root (ScanNode), the pid
  // the kernel gives of the socket's server (SO_PEERCRED), in this reader's
  // pid namespace.
  pid_t pid = 0;
  // ScanNode: the server's uid (SO_PEERCRED) and its user's name, or the
  // uid when it has none. "" elsewhere.
  std::string user;
  LiveState state;
  // What /proc says of it at the scan, and the start time of its parent now
  // (0: unknown): whether it is stopped or orphaned (live_holders.h).
  ProcStat proc;
  uint64_t parent_start_ticks = 0;
  // False for a process that did not answer (LiveScan::silent): `state` is
  // then what is known of it without its answer (live_known.h), from
  // `known_from` ("" when nothing is: `state` is empty), taken
  // `known_age_ms` before the scan.
  bool answered = true;
  std::string known_from;
  uint64_t known_age_ms = 0;
  // Its status page (status_page.h), when it has one: its threads' CUDA
  // calls in progress, read whether it answered or not.
  std::optional<StatusView> status;
};

struct LiveScan {
  std::vector<LiveProcess> processes;  // by pid
  // Processes that listen but did not answer in time (stopped, hung, too
  // busy), by pid: each is also a problem line. LiveKnown::Fill gives them
  // what is known.
  std::vector<LiveProcess> silent;
  // One line per entry that answered badly (a process that stopped answering,
  // an answer that is not a live state, one served by another user), or the
  // one line that says why the directory was not read: the rest are still
  // read. Printable (live_answer.h): no terminal control in them.
  std::vector<std::string> problems;
  // Entries removed from the directory: of processes that no longer exist,
  // and names nobody has listened on for kStaleEntrySeconds.
  size_t cleaned = 0;
};

// What the status page of process `pid` says it holds (its device memory by
// device), with its command line and this host: the state of a process that
// did not answer, as far as its page knows (live_known.h).
LiveState StateFromStatusPage(pid_t pid, const StatusView& view);

// An entry nobody listens on, of a pid that exists (a process that exec'ed
// into a program without gpuwatch, a file that is not a socket), is removed
// once its name is this old: a process binds and listens at once.
inline constexpr int kStaleEntrySeconds = 10;

// The live directory to read: `dir` when not empty, else the environment's
// (LiveDirFromEnvironment), or, without GPUWATCH_LIVE_DIR, this user's
// directory in the node root when it exists (live_dir.h: the user's
// processes serve there). False with *problem when it cannot be read
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

// Who must serve the sockets of a directory ScanSockets reads: `uid`; with
// `node`, each process's pid is the server's (SO_PEERCRED) and its user is
// named, and a socket served by another uid is a problem that names the
// directory's owner.
struct SocketOwner {
  uid_t uid = 0;
  bool node = false;
};

// ScanLive's reading of a directory already checked.
LiveScan ScanSockets(const std::string& dir, const SocketOwner& owner, size_t top, int timeout_ms);

// The node root: GPUWATCH_NODE_DIR, else /run/gpuwatch (live_dir.h).
std::string NodeRoot();

// Every user's directory in the node root `root` (live_dir.h), each read
// as ScanLive reads one, with each process's user. The root must be a
// directory owned by root or by this user, sticky when others may write in
// it; each user's directory, `<uid>`, a directory (not a symlink) owned by
// that uid that no one else may write: one that is not is one problem and
// is not read. Each directory is reached through a descriptor opened with
// O_NOFOLLOW and checked with fstat, so that renaming it meanwhile
// changes nothing read.
LiveScan ScanNode(const std::string& root, size_t top, int timeout_ms);

}  // namespace gpuwatch::tools

#endif  // GPUWATCH_TOOLS_LIVE_LIVE_CLIENT_H_
