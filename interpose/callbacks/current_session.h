// The process's one Session (libgpuwatch/session/session.h), as every file
// of interpose/ reaches it: the callbacks (callbacks.cc, graph_callbacks.cc),
// the activity buffers (activity.cc), NVTX's memory extension (nvtx_mem.cc)
// and the agent (agent.h: config(), the recording; reports, fork, the live
// view). One pointer, not a copy per file.
//
// Publication: attach makes the Session, sets it up whole (its stack table
// primed, its suppressions loaded, its GPU clock set) and then publishes it
// with a release store, before the CUPTI activity records and callbacks
// that read it are enabled; every reader loads it with acquire, so a thread
// that sees the pointer sees the Session as it was published. The Session
// is never destroyed (a fork child swaps the recording inside it, not the
// pointer), so a pointer once read stays valid. Null before attach, when
// gpuwatch is off, and after an attach that failed once it was published.
#ifndef GPUWATCH_INTERPOSE_CALLBACKS_CURRENT_SESSION_H_
#define GPUWATCH_INTERPOSE_CALLBACKS_CURRENT_SESSION_H_

#include <atomic>

namespace gpuwatch {

class Session;

namespace current_session_internal {
extern std::atomic<Session*> g_session;  // current_session.cc; use the functions below
}  // namespace current_session_internal

// The published Session; null when there is none. One acquire load (a plain
// load on x86-64), inlined: a callback calls it for every event.
inline Session* CurrentSession() {
  return current_session_internal::g_session.load(std::memory_order_acquire);
}

// Publishes `session` (release); null withdraws it. Attach publishes once;
// the unit tests publish one Session per test.
void PublishSession(Session* session);

}  // namespace gpuwatch

#endif  // GPUWATCH_INTERPOSE_CALLBACKS_CURRENT_SESSION_H_
