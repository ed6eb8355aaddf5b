// The report's stderr summary (BuildSummaryText).
#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "libgpuwatch/report/format.h"
#include "libgpuwatch/report/report_sections.h"
#include "libgpuwatch/report/site_groups.h"
#include "libgpuwatch/symbolize/mixed_stack.h"

namespace gpuwatch {

namespace {

// A frame as the summary names it: "file:line (function)", "function
// (module)", or "" past the end of the stack.
std::string FrameText(const std::vector<Frame>& frames, size_t i) {
  if (i >= frames.size()) return "";
  const Frame& f = frames[i];
  std::string text = f.line > 0 ? std::string(Basename(f.file)) + ":" + std::to_string(f.line)
                                : std::string(Basename(f.module));
  if (!f.function.empty()) text += " (" + f.function + ")";
  return text;
}

// The rows of a leak list, at most `top` locations: sites that read the same
// (location and function) are one row, with their call paths under it.
std::string LeakRows(const std::vector<const LeakGroup*>& groups,
                     const std::vector<const Suppression*>& rules, SiteResolver* sites,
                     size_t top) {
  std::vector<std::string> keys;
  std::vector<uint64_t> bytes_of;
  keys.reserve(groups.size());
  for (const LeakGroup* g : groups) {
    bytes_of.push_back(g->bytes);
    const std::vector<Frame>& frames = sites->FramesOf(g->stack_id);
    const Frame* site = SiteFrame(frames);
    const std::string function =
        site != nullptr ? site->function : (frames.empty() ? "" : frames.front().function);
    std::string key = sites->LocationOf(g->stack_id);
    if (!function.empty()) key += " (" + function + ")";
    keys.push_back(std::move(key));
  }
  std::string out;
  char line[768];
  const std::vector<SiteGroup> by_location = GroupByLocation(keys, bytes_of);
  for (size_t i = 0; i < by_location.size() && i < top; ++i) {
    const SiteGroup& at = by_location[i];
    uint64_t bytes = 0;
    uint64_t count = 0;
    for (const size_t m : at.members) {
      bytes += groups[m]->bytes;
      count += groups[m]->count;
    }
    const size_t first = at.members.front();
    const std::string rule = rules.empty() ? "" : " by " + rules[first]->Text();
    const std::string paths =
        at.members.size() > 1 ? ", " + CountOf(at.members.size(), "call path", "call paths") : "";
    std::snprintf(line, sizeof(line), "gpuwatch:   %10s in %6" PRIu64 " at %s%s%s\n",
                  FormatBytes(bytes).c_str(), count, keys[first].c_str(), rule.c_str(),
                  paths.c_str());
    out += line;
    if (at.members.size() < 2) continue;
    const auto frame = [&](size_t row, size_t index) {
      return FrameText(sites->FramesOf(groups[row]->stack_id), index);
    };
    const size_t split = FirstDifference(at.members, frame);
    for (size_t k = 0; k < at.members.size() && k < kCallPathsShown; ++k) {
      const LeakGroup& g = *groups[at.members[k]];
      const std::string via = frame(at.members[k], split);
      std::snprintf(line, sizeof(line), "gpuwatch:     %10s in %6" PRIu64 " via %s\n",
                    FormatBytes(g.bytes).c_str(), g.count, via.empty() ? "?" : via.c_str());
      out += line;
    }
    if (at.members.size() > kCallPathsShown) {
      out += "gpuwatch:     " + MoreCallPaths(at.members.size() - kCallPathsShown) + "\n";
    }
  }
  if (by_location.size() > top) {
    out += "gpuwatch:   ... and " +
           CountOf(by_location.size() - top, "more location", "more locations") +
           " (in the report)\n";
  }
  return out;
}

}  // namespace

std::string BuildSummaryText(const TrackerSnapshot& snap, const ReportContext& context,
                             const ReportAnalysis& analysis, SiteResolver* sites,
                             const std::string& path) {
  constexpr size_t kTopSites = 5;
  // A run that ended on a CUDA error leads with it.
  std::string out = context.cuda_errors != nullptr ? ErrorSummary(*context.cuda_errors, sites) : "";
  const bool failed = context.cuda_errors != nullptr && !context.cuda_errors->sticky.empty();
  char line[768];
  uint64_t device_allocs = 0;
  uint64_t host_allocs = 0;
  uint64_t copies = 0;
  for (int k = 0; k < kNumMemKinds; ++k) {
    const auto kind = static_cast<MemKind>(k);
    if (IsDeviceKind(kind)) device_allocs += snap.kinds[k].allocs;
    if (IsHostKind(kind)) host_allocs += snap.kinds[k].allocs;
  }
  for (int k = 0; k < kNumCopyKinds; ++k)
    copies += CopiesOf(snap, context, static_cast<CopyKind>(k)).count;
  char host[64] = "";
  if (host_allocs != 0) {
    std::snprintf(host, sizeof(host), " (and %" PRIu64 " of pinned host memory)", host_allocs);
  }
  std::snprintf(line, sizeof(line),
                "gpuwatch: %" PRIu64 " device allocations%s, %s, %" PRIu64
                " kernel launches; device peak %s\n",
                device_allocs, host, Copies(copies).c_str(), snap.launches,
                FormatBytes(snap.device_peak_bytes).c_str());
  out += line;
  if (!context.recording_stopped.empty()) {
    std::snprintf(line, sizeof(line),
                  "gpuwatch: recording had stopped by %.1f s after attach: %s; what is live "
                  "below was live then, not known to leak\n",
                  static_cast<double>(context.recording_stopped_ns) / 1e9,
                  context.recording_stopped.c_str());
    out += line;
  }
  if (const LifecycleFigures& l = context.lifecycle; l.context_freed_count != 0) {
    std::snprintf(line, sizeof(line),
                  "gpuwatch: freed by a context reset: %s of device and pinned memory in %s "
                  "(cudaDeviceReset, cuCtxDestroy; in the context reports, not live at exit)\n",
                  FormatBytes(l.context_freed_bytes).c_str(),
                  CountOf(l.context_freed_count, "allocation", "allocations").c_str());
    out += line;
  }
  // Another process's memory still open is shown after this process's own,
  // and is not its leak. What a `leak:` suppression matches is listed apart,
  // with its rule, and counted in the "Suppressions used" table after.
  const char* live_state = failed ? "live when the run failed" : "still live";
  const struct {
    const std::vector<LeakGroup>* groups;
    const char* state;
    const char* what;
    const char* one;
    const char* many;
    bool suppressible;
  } lists[] = {
      {&analysis.device_live, live_state, "device memory", "allocation", "allocations", true},
      {&analysis.host_live, live_state, "pinned host memory", "allocation", "allocations", true},
      {&analysis.imported_live, "still open",
       "another process's memory (CUDA IPC; not a leak of this process)", "mapping", "mappings",
       false}};
  std::vector<SuppressionUse> uses;
  const auto print = [&](const std::vector<const LeakGroup*>& groups,
                         const std::vector<const Suppression*>& rules, const char* state,
                         const char* what, const char* one, const char* many) {
    if (groups.empty()) return;
    uint64_t bytes = 0;
    uint64_t count = 0;
    for (const LeakGroup* g : groups) {
      bytes += g->bytes;
      count += g->count;
    }
    std::snprintf(line, sizeof(line), "gpuwatch: %s: %s of %s in %s from %s\n", state,
                  FormatBytes(bytes).c_str(), what, CountOf(count, one, many).c_str(),
                  CountOf(groups.size(), "site", "sites").c_str());
    out += line;
    out += LeakRows(groups, rules, sites, kTopSites);
  };
  for (const auto& list : lists) {
    std::vector<const LeakGroup*> live;
    std::vector<const LeakGroup*> suppressed;
    std::vector<const Suppression*> rules;
    for (size_t i = 0; i < list.groups->size(); ++i) {
      const LeakGroup& g = (*list.groups)[i];
      // As in the report: sites past its limit are not classified.
      const Suppression* rule =
          list.suppressible && i < kMaxSitesPerSection
              ? sites->ClassOf(g.stack_id, context.suppressions, SuppressionKind::kLeak).suppressed
              : nullptr;
      if (rule == nullptr) {
        live.push_back(&g);
        continue;
      }
      suppressed.push_back(&g);
      rules.push_back(rule);
      AddSuppressionUse(&uses, rule->Text(), g.count, g.bytes);
    }
    print(live, {}, list.state, list.what, list.one, list.many);
    const std::string state = std::string("suppressed, ") + list.state + " (not counted as leaked)";
    print(suppressed, rules, state.c_str(), list.what, list.one, list.many);
  }
  out += SuppressionsUsedTable(std::move(uses), "gpuwatch: ");
  if (snap.unknown_frees > 0) {
    out += "gpuwatch: " + CountOf(snap.unknown_frees, "free", "frees") + " of unknown pointers\n";
  }
  if (context.timeline != nullptr) {
    out += GrowthSummary(analysis, context.suppressions, sites);
  }
  if (context.phases != nullptr) out += PhaseSummary(*context.phases);
  if (context.regions != nullptr) out += RegionSummary(*context.regions, sites);
  if (context.transfers != nullptr) out += TransferSummary(*context.transfers, analysis, sites);
  if (context.kernels != nullptr && !context.kernels->empty()) {
    const KernelStats& top = context.kernels->front();
    uint64_t launches = 0;
    for (const KernelStats& k : *context.kernels) launches += k.launches;
    std::snprintf(line, sizeof(line), "gpuwatch: kernels: %s of %s; most: %s x%" PRIu64 "\n",
                  CountOf(launches, "launch", "launches").c_str(),
                  CountOf(context.kernels->size(), "kernel", "kernels").c_str(),
                  DemangleKernel(top.name).c_str(), top.launches);
    out += line;
  }
  const LifecycleFigures& l = context.lifecycle;
  uint64_t blocked = 0;
  for (const uint64_t ns : l.sync_ns) blocked += ns;
  if (l.context_ready_ns != 0 || blocked != 0) {
    const double init_ms = l.context_ready_ns >= l.first_call_ns
                               ? static_cast<double>(l.context_ready_ns - l.first_call_ns) / 1e6
                               : 0.0;
    char cold[96] = "";
    if (l.first_launch_ns != 0 && l.first_launch_ns >= l.first_call_ns) {
      std::snprintf(cold, sizeof(cold), "; first kernel %.1f ms after the first CUDA call",
                    static_cast<double>(l.first_launch_ns - l.first_call_ns) / 1e6);
    }
    std::snprintf(line, sizeof(line),
                  "gpuwatch: lifecycle: CUDA init %.1f ms%s%s; host blocked in synchronization "
                  "%.1f ms\n",
                  init_ms, l.first_call_observed ? "" : " (from attach)", cold,
                  static_cast<double>(blocked) / 1e6);
    out += line;
  }
  if (l.contexts_destroyed >= kContextChurnMin) {
    out +=
        "gpuwatch: finding: " + ContextChurnText(l.contexts_created, l.contexts_destroyed) + "\n";
  }
  for (const ChurnSite& c : analysis.churn) {
    out += "gpuwatch: finding: " + AllocChurnText(AllocChurnOf(c, sites)) + "\n";
  }
  if (!path.empty()) out += "gpuwatch: report written to " + path + "\n";
  return out;
}

}  // namespace gpuwatch
