// The live directory: where each process under gpuwatch serves its live
// state (interpose/agent/live.cc) to `gpuwatch top` and `gpuwatch exporter` on the
// same machine, one Unix socket per process, `<pid>.sock`.
//
// It is per user: GPUWATCH_LIVE_DIR, else $XDG_RUNTIME_DIR/gpuwatch, else
// /tmp/gpuwatch-<uid>. It is made mode 0700; one that is a symlink, not a
// directory, or someone else's is refused, so that no other user can plant
// sockets in it or read the live state (each server also checks its peer's
// uid).
#ifndef GPUWATCH_LIBGPUWATCH_BASE_LIVE_DIR_H_
#define GPUWATCH_LIBGPUWATCH_BASE_LIVE_DIR_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "libgpuwatch/base/config.h"

namespace gpuwatch {

// GPUWATCH_LIVE_DIR when set and not empty, else the per-user default.
std::string LiveDirFromEnvironment(const EnvLookup& lookup);

// Makes `dir` (its last component only; mode 0700) unless it exists, and
// checks it: a directory, not a symlink, owned by the effective user, and no
// one else's to write (a looser mode of the user's own is tightened to
// 0700). False with the reason in *problem ("... is owned by uid 0") when it
// cannot be used.
bool PrepareLiveDir(const std::string& dir, bool create, std::string* problem);

// "<dir>/<pid>.sock". Empty when it would not fit a Unix socket's path
// (107 bytes).
std::string LiveSocketPath(const std::string& dir, pid_t pid);

// The pids of the sockets in `dir` (any order): names "<digits>.sock", the
// digits without a leading zero.
std::vector<pid_t> ListLiveSockets(const std::string& dir);

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_BASE_LIVE_DIR_H_
