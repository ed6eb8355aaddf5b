// The live state of this process (libgpuwatch/report/live_state.h), served
// to `gpuwatch top` and `gpuwatch exporter` on a Unix socket in the live
// directory (libgpuwatch/base/live_dir.h), `<pid>.sock`, by gpuwatch's
// background thread: nothing is built until a reader connects. A reader of
// another uid is refused (SO_PEERCRED). docs/live.md has the protocol.
//
// The background thread also keeps one sample a second of what the sites
// hold (LiveHistory), so that a reader sees growth and recent history at
// once, and notes when the counters it samples last changed (LiveActivity:
// the last CUDA activity, for readers that mark idle holders).
#ifndef GPUWATCH_INTERPOSE_AGENT_LIVE_H_
#define GPUWATCH_INTERPOSE_AGENT_LIVE_H_

#include <cstdint>

#include "interpose/agent/agent.h"

namespace gpuwatch {

// At attach, before the background thread starts (it polls the socket):
// binds and listens when GPUWATCH_LIVE is on. On any failure one line, and
// the process runs without a live view.
void OpenLiveSocket(Agent& agent);

// The listening socket, -1 when none.
int LiveSocketFd();

// The background thread's part: a history sample and the status page's
// update (status.h; `checkpoint_ns`: the last checkpoint's time, 0 when
// none), LiveTickNs apart, and the readers waiting on the socket, answered
// one after the other.
inline constexpr uint64_t kLiveTickNs = 1000000000ULL;
void LiveTick(Agent& agent, uint64_t checkpoint_ns);
void ServeLiveReaders(Agent& agent);

// At exit: the socket's and the status page's names are removed (readers
// then see the process gone).
void CloseLiveSocket();

// In a fork child: the parent's socket is closed (its name stays: it is the
// parent's) and one of the child's own is opened. Before the background thread starts.
void LiveAfterFork(Agent& agent);

}  // namespace gpuwatch

#endif  // GPUWATCH_INTERPOSE_AGENT_LIVE_H_
