// One process's answer on its live socket (interpose/agent/live.cc serves it;
// docs/live.md has the protocol), read into typed values for `gpuwatch top`
// and `gpuwatch exporter`, within limits that no answer, broken or hostile,
// can pass: at most kMaxLiveAnswerBytes, nested no deeper than
// kMaxReportDepth (checked on the text, before parsing), every field of the
// type the protocol gives it. A missing field reads as 0, "" or unknown; a
// field of the wrong type or out of range refuses the whole answer, with one
// line naming the field. Nothing here throws on any input but bad_alloc.
#ifndef GPUWATCH_TOOLS_LIVE_LIVE_ANSWER_H_
#define GPUWATCH_TOOLS_LIVE_LIVE_ANSWER_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nlohmann/json.hpp"

namespace gpuwatch::tools {

// The longest answer read (1,000 sites with long template names come to a few
// MiB); a longer one is refused unread past this.
inline constexpr size_t kMaxLiveAnswerBytes = size_t{16} << 20;

struct LiveSite {
  uint64_t site = 0;
  std::string location;
  std::string function;  // "" when unknown
  uint64_t live_bytes = 0;
  std::optional<double> growth_per_min;          // unknown before 5 s of history
  std::optional<double> growth_per_mark;         // unknown with fewer than two marks
  std::vector<std::optional<uint64_t>> history;  // unknown where not sampled
  // Not the protocol's: growth per minute from `history`, a sustained rise
  // only (live_growth.h), as `gpuwatch top` shows and sorts it.
  std::optional<double> growth;
  // Not the protocol's: sites of the answer merged into this row because
  // they read the same (GroupSitesByLocation); 1 for a site of its own.
  size_t call_paths = 1;
};

// Sites that read the same (location and function: one helper's line
// reached from many call paths) merged into the first's row: live bytes,
// growth per mark and history summed (unknown where one is unknown), growth
// recomputed, `call_paths` counted. `gpuwatch top` shows them so.
void GroupSitesByLocation(std::vector<LiveSite>* sites, uint64_t interval_ms);

// The fields below are the protocol's (docs/live.md), by the same names.
struct LiveDevice {
  uint64_t device = 0, live_bytes = 0, peak_bytes = 0;
  std::optional<uint64_t> total_bytes;
  // Which physical GPU it is: "" or unknown when the process did not say.
  std::string uuid, pci_bus_id;
  std::optional<uint64_t> gpu;
};

struct LiveKind {
  std::string name;  // device, pinned_host, ...
  uint64_t live_bytes = 0, peak_bytes = 0, live_count = 0;
  uint64_t allocs = 0, alloc_bytes = 0, frees = 0;
};

struct LiveTransfer {
  std::string direction;  // h2d, d2h, ...
  std::string host;       // pageable, pinned, ...
  uint64_t count = 0, bytes = 0, timed_count = 0, duration_ns = 0;
};

// The live state of schema "gpuwatch-live", version 1.
struct LiveState {
  std::string host;
  std::string rank;  // "" when none
  std::vector<std::string> command;
  std::optional<uint64_t> started_unix_ms;
  uint64_t uptime_ns = 0;
  uint64_t live_bytes = 0, peak_bytes = 0, live_count = 0;  // "device": every device kind
  std::vector<LiveDevice> devices;
  std::vector<LiveKind> kinds;
  uint64_t allocs = 0, frees = 0, ooms = 0, kernel_launches = 0, unknown_frees = 0;  // "counters"
  std::vector<LiveTransfer> transfers;
  // "rates": unknown before 5 s of history
  std::optional<double> device_bytes_per_min, h2d_bytes_per_s, d2h_bytes_per_s;
  // "history": device memory live at each sample, oldest first, one every
  // history_interval_ms.
  std::vector<std::optional<uint64_t>> device_history;
  uint64_t history_interval_ms = 0;
  // Not the protocol's: growth per minute of device memory from
  // device_history, a sustained rise only (live_growth.h).
  std::optional<double> device_growth;
  uint64_t marks = 0;
  std::vector<LiveSite> sites;
  uint64_t other_count = 0, other_bytes = 0;  // "other_sites"
  // "torch": PyTorch's blocks as last handed over (--torch-blocks); absent
  // when none was.
  struct Torch {
    std::string moment;
    uint64_t reserved_bytes = 0, allocated_bytes = 0, segments = 0;
  };
  std::optional<Torch> torch;
  // "parent": the parent when the live view started (attach, or the fork),
  // with its start time (clock ticks since boot); absent when unknown.
  struct Parent {
    uint64_t pid = 0, start_ticks = 0;
  };
  std::optional<Parent> parent;
  // "activity": the last CUDA activity (Unix ms) and how long before the
  // answer it was; absent from an older process's answer.
  std::optional<uint64_t> last_activity_unix_ms, idle_ns;
  // "cgroup": the container, systemd unit and pod the process runs in; ""
  // each when none (and all from an older process's answer).
  struct Cgroup {
    std::string container_id, systemd_unit, pod_uid, pod_namespace, pod_name;
  };
  Cgroup cgroup;
};

// Reads an answer's text. False with *problem, one line without the pid
// ("not a gpuwatch live state (32 bytes)", "counters.ooms is \"x\", expected
// a count (an integer)", "nested deeper than 64 levels (at byte 64)"), when
// it is not a live state this build reads.
bool ParseLiveAnswer(std::string_view text, LiveState* out, std::string* problem);

// The same from a parsed document (the tests build states as JSON).
bool ReadLiveState(const nlohmann::json& doc, LiveState* out, std::string* problem);

// `text` with what a terminal would act on made visible: C0 controls, DEL
// and C1 controls as \xNN (ESC as \x1b, a newline as \x0a), bidirectional
// overrides as \u202e and the like, and bytes that are not UTF-8 as \xNN;
// cut to at most `max_bytes` bytes (whole escapes and characters).
std::string Printable(std::string_view text, size_t max_bytes = SIZE_MAX);

}  // namespace gpuwatch::tools

#endif  // GPUWATCH_TOOLS_LIVE_LIVE_ANSWER_H_
