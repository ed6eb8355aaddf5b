#include "driver/hang.h"

#include <unistd.h>

#include <cstdlib>
#include <mutex>
#include <set>
#include <string>

#include "common/leaked.h"

namespace gwsim::drv {
namespace {

struct Hangs {
  std::mutex mu;
  std::set<const CUstream_st*> streams;
  std::set<const CUevent_st*> events;
};

Hangs& H() { return Leaked<Hangs>(); }

// GWSIM_HANG_KERNEL, read once; empty: no kernel hangs.
const std::string& Pattern() {
  static const std::string* const pattern = [] {
    const char* v = std::getenv("GWSIM_HANG_KERNEL");  // NOLINT(concurrency-mt-unsafe)
    return new std::string(v != nullptr ? v : "");
  }();
  return *pattern;
}

bool Blocking(const CUstream_st* s) { return (s->flags & CU_STREAM_NON_BLOCKING) == 0; }

}  // namespace

void HangIfNamed(const CUfunc_st* function, CUstream_st* stream) {
  const std::string& pattern = Pattern();
  if (pattern.empty() || function->name.find(pattern) == std::string::npos) return;
  Hangs& h = H();
  std::lock_guard lock(h.mu);
  h.streams.insert(stream);
}

bool StreamHangs(const CUstream_st* stream) {
  if (Pattern().empty()) return false;
  Hangs& h = H();
  std::lock_guard lock(h.mu);
  if (h.streams.count(stream) != 0) return true;
  if (stream->ctx == nullptr || stream != stream->ctx->legacy_stream) return false;
  // The legacy stream waits for every blocking stream of its context.
  for (const CUstream_st* s : h.streams) {
    if (s->ctx == stream->ctx && Blocking(s)) return true;
  }
  return false;
}

bool ContextHangs(const CUctx_st* ctx) {
  if (Pattern().empty()) return false;
  Hangs& h = H();
  std::lock_guard lock(h.mu);
  for (const CUstream_st* s : h.streams) {
    if (s->ctx == ctx) return true;
  }
  return false;
}

void RecordEventHang(const CUevent_st* event, const CUstream_st* stream) {
  if (Pattern().empty()) return;
  const bool hangs = StreamHangs(stream);
  Hangs& h = H();
  std::lock_guard lock(h.mu);
  if (hangs) {
    h.events.insert(event);
  } else {
    h.events.erase(event);  // recorded again behind work that completes
  }
}

bool EventHangs(const CUevent_st* event) {
  if (Pattern().empty()) return false;
  Hangs& h = H();
  std::lock_guard lock(h.mu);
  return h.events.count(event) != 0;
}

void WaitIfHung(bool hangs) {
  if (!hangs) return;
  for (;;) pause();  // woken only to run a signal's handler; the kernel never finishes
}

}  // namespace gwsim::drv
