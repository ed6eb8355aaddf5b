#include "interpose/callbacks/current_session.h"

namespace gpuwatch {

// Constant-initialized: safe to read from any thread, constructors included.
std::atomic<Session*> current_session_internal::g_session{nullptr};

void PublishSession(Session* session) {
  current_session_internal::g_session.store(session, std::memory_order_release);
}

}  // namespace gpuwatch
