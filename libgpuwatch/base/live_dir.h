// The live directory: where each process under gpuwatch serves its live
// state (interpose/agent/live.cc) to `gpuwatch top` and `gpuwatch exporter` on the
// same machine, one Unix socket per process, `<pid>.sock`.
//
// It is per user: GPUWATCH_LIVE_DIR, else $XDG_RUNTIME_DIR/gpuwatch, else
// /tmp/gpuwatch-<uid>. It is made mode 0700; one that is a symlink, not a
// directory, or someone else's is refused, so that no other user can plant
// sockets in it or read the live state (each server also checks its peer's
// uid).
//
// On a node with an operator there is also the node root, GPUWATCH_NODE_DIR
// or /run/gpuwatch: when it exists, a process serves in its own
// subdirectory of it, `<root>/<uid>`, instead of the per-user directory, so
// that one exporter (`gpuwatch exporter --node`, run as the root's owner or
// a member of its group) reads every user's processes (docs/prometheus.md,
// "One node, many users").
#ifndef GPUWATCH_LIBGPUWATCH_BASE_LIVE_DIR_H_
#define GPUWATCH_LIBGPUWATCH_BASE_LIVE_DIR_H_

#include <sys/stat.h>
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
// `group_read`: a mode of 0750 is kept (a user's directory in the node
// root, readable by the exporter's group).
bool PrepareLiveDir(const std::string& dir, bool create, std::string* problem,
                    bool group_read = false);

// GPUWATCH_NODE_DIR when set and not empty, else /run/gpuwatch.
std::string NodeDirFromEnvironment(const EnvLookup& lookup);

// Who may read a process's live state besides its own user: the node
// root's owner, and the root's group when the user's directory is open to
// it (0750, the group the root's setgid bit gave it).
struct NodeReader {
  uid_t uid = 0;
  gid_t gid = 0;
  bool group = false;
};

// Whether the node root `st` (its lstat) is safe to use: a directory, not a
// symlink, owned by root or by the reader, and, when others may write in it
// (to make their directories), sticky. False with *problem otherwise.
bool CheckNodeRoot(const std::string& root, const struct stat& st, std::string* problem);

// A process's directory in the node root: `<root>/<euid>`, made (mode 0750
// when the root's group is inherited, else 0700) unless it exists, and
// checked through descriptors (O_NOFOLLOW, fstat): a directory owned by
// this user that no one else may write. Its path in *dir and who may read
// it in *reader. False with *problem when the root or the directory cannot
// be used; `*absent` is true when the root does not exist (the per-user
// directory is used, and nothing is said).
bool PrepareNodeUserDir(const std::string& root, std::string* dir, NodeReader* reader, bool* absent,
                        std::string* problem);

// "<dir>/<pid>.sock". Empty when it would not fit a Unix socket's path
// (107 bytes).
std::string LiveSocketPath(const std::string& dir, pid_t pid);

// The pids of the sockets in `dir` (any order): names "<digits>.sock", the
// digits without a leading zero.
std::vector<pid_t> ListLiveSockets(const std::string& dir);

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_BASE_LIVE_DIR_H_
