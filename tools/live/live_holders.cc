#include "tools/live/live_holders.h"

#include <cstdio>
#include <cstdlib>

namespace gpuwatch::tools {

std::optional<LiveState::Parent> ParentAtStart(const LiveProcess& p) {
  if (p.state.parent.has_value()) return p.state.parent;
  if (!p.status.has_value() || p.status->parent_pid <= 0) return std::nullopt;
  return LiveState::Parent{static_cast<uint64_t>(p.status->parent_pid), 0};
}

HolderState HolderStateOf(const LiveProcess& p, uint64_t idle_after_ns) {
  HolderState s;
  s.stopped = Stopped(p.proc);
  if (const std::optional<LiveState::Parent> parent = ParentAtStart(p);
      parent.has_value() && p.proc.known) {
    const LiveState::Parent& at_attach = *parent;
    // Its parent now is another process, or the same pid started again
    // (when /proc and its answer say when it started).
    s.orphaned = static_cast<uint64_t>(p.proc.ppid) != at_attach.pid ||
                 (p.parent_start_ticks != 0 && at_attach.start_ticks != 0 &&
                  p.parent_start_ticks != at_attach.start_ticks);
  }
  if (p.state.idle_ns.has_value() && (p.answered || !p.known_from.empty())) {
    // What was known of a silent process, aged since.
    s.idle_ns = *p.state.idle_ns + (p.answered ? 0 : p.known_age_ms * 1000000);
  }
  s.idle = !s.stopped && s.idle_ns.has_value() && *s.idle_ns >= idle_after_ns;
  return s;
}

std::string HolderStateName(const HolderState& s) {
  std::string name = s.stopped ? "stopped" : s.idle ? "idle" : "";
  if (s.orphaned) name += name.empty() ? "orphaned" : "+orphaned";
  return name.empty() ? "running" : name;
}

std::string HolderStateShort(const HolderState& s) {
  if (!s.orphaned || (!s.stopped && !s.idle)) return HolderStateName(s);
  return s.stopped ? "stop+orph" : "idle+orph";
}

bool ResolveIdleSeconds(uint64_t option, uint64_t* seconds, std::string* problem) {
  constexpr uint64_t kMaxSeconds = 31536000;  // a year
  *seconds = kDefaultIdleSeconds;
  if (option != 0) {
    *seconds = option;
    return true;
  }
  const char* text = std::getenv("GPUWATCH_IDLE_SECONDS");  // NOLINT(concurrency-mt-unsafe)
  if (text == nullptr || *text == '\0') return true;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text, &end, 10);
  if (*end != '\0' || v == 0 || v > kMaxSeconds || text[0] == '-') {
    *problem = std::string("bad GPUWATCH_IDLE_SECONDS '") + text +
               "': expected a number of seconds from 1 to 31536000";
    return false;
  }
  *seconds = v;
  return true;
}

bool ResolveReaderOptions(const char* command, const std::string& dir_option, uint64_t idle_option,
                          std::string* dir, uint64_t* idle_after_ns) {
  std::string problem;
  uint64_t idle_s = 0;
  if (!ResolveLiveDir(dir_option, dir, &problem) ||
      !ResolveIdleSeconds(idle_option, &idle_s, &problem)) {
    std::fprintf(stderr, "gpuwatch %s: %s\n", command, problem.c_str());
    return false;
  }
  *idle_after_ns = idle_s * 1000000000ULL;
  return true;
}

}  // namespace gpuwatch::tools
