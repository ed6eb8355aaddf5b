// Processes that hold device memory while doing nothing, as `gpuwatch top`
// and `gpuwatch exporter` mark them (docs/live.md, "Holders that do
// nothing"): stopped (SIGSTOP, Ctrl-Z, a debugger: state T or t in /proc),
// orphaned (the parent it had when gpuwatch attached has died: it was
// reparented to init or to a subreaper), idle (no CUDA activity for the idle
// threshold). Pure but for the threshold's environment variable.
#ifndef GPUWATCH_TOOLS_LIVE_LIVE_HOLDERS_H_
#define GPUWATCH_TOOLS_LIVE_LIVE_HOLDERS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "tools/live/live_client.h"

namespace gpuwatch::tools {

// No CUDA activity for this long makes a process idle, unless --idle-after
// or GPUWATCH_IDLE_SECONDS says otherwise.
inline constexpr uint64_t kDefaultIdleSeconds = 600;

struct HolderState {
  bool stopped = false;
  bool orphaned = false;
  bool idle = false;  // never with stopped: a stopped process does nothing anyway
  // Since its last CUDA activity, as of the scan; unknown for a process that
  // did not answer and of which no earlier answer is known.
  std::optional<uint64_t> idle_ns;
};

HolderState HolderStateOf(const LiveProcess& p, uint64_t idle_after_ns);

// Its parent when its live view started: from its answer (or what is known
// of it), else from its status page (a process stopped before any reader
// got an answer from it; the pid alone). None when neither says.
std::optional<LiveState::Parent> ParentAtStart(const LiveProcess& p);

// "running", "idle", "stopped", "orphaned" (running, but orphaned),
// "stopped+orphaned", "idle+orphaned".
std::string HolderStateName(const HolderState& s);

// The same in at most 9 columns, for top's STATE column: "stop+orph",
// "idle+orph".
std::string HolderStateShort(const HolderState& s);

// The idle threshold in seconds: `option` when it is not 0 (--idle-after),
// else GPUWATCH_IDLE_SECONDS, else kDefaultIdleSeconds. False with *problem
// (one line) when the variable is not a number of seconds from 1 to
// 31536000.
bool ResolveIdleSeconds(uint64_t option, uint64_t* seconds, std::string* problem);

// What `gpuwatch top` and `gpuwatch exporter` (`command`) resolve first: the
// live directory (ResolveLiveDir) and the idle threshold in ns. False after
// one line on stderr ("gpuwatch COMMAND: ...").
bool ResolveReaderOptions(const char* command, const std::string& dir_option, uint64_t idle_option,
                          std::string* dir, uint64_t* idle_after_ns);

}  // namespace gpuwatch::tools

#endif  // GPUWATCH_TOOLS_LIVE_LIVE_HOLDERS_H_
