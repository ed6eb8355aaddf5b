// The report document (BuildReportJson) and its sections of memory,
// kernels, lifecycle and oom; report_growth.cc, report_transfers.cc and
// report_trace.cc build the others.
#include <algorithm>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "libgpuwatch/base/version.h"
#include "libgpuwatch/report/report_schema.h"
#include "libgpuwatch/report/report_sections.h"
#include "libgpuwatch/report/trace_json.h"

namespace gpuwatch {

using nlohmann::json;
namespace key = report_key;

void AddSiteClass(const SiteClass& c, json* entry) {
  if (!c.category.empty() || c.category_off) (*entry)[key::kCategory] = std::string(c.category);
  if (c.suppressed != nullptr) (*entry)[key::kSuppressed] = c.suppressed->Text();
}

CopyTotals CopiesOf(const TrackerSnapshot& snap, const ReportContext& context, CopyKind kind) {
  const int k = static_cast<int>(kind);
  if (context.transfers == nullptr) return snap.copies[k];
  CopyTotals c;
  for (const TransferStats& s : context.transfers->totals[k]) {
    c.count += s.count;
    c.bytes += s.bytes;
  }
  return c;
}

namespace {

json KindJson(const KindTotals& t) {
  return json{{"current_bytes", t.current_bytes}, {"current_count", t.current_count},
              {"peak_bytes", t.peak_bytes},       {"allocs", t.allocs},
              {"alloc_bytes", t.alloc_bytes},     {"frees", t.frees}};
}

// A leaks section: its sites, largest first, each marked with its category
// and suppression, and its bytes split into leaked, suppressed and kept by
// libraries (LeakSplitFigures; omitted sites count as leaked).
json LeakSection(const std::vector<LeakGroup>& groups, const Suppressions* suppressions,
                 SiteResolver* sites) {
  json list = json::array();
  LeakSplitFigures split;
  uint64_t omitted_bytes = 0;
  uint64_t omitted_sites = 0;
  for (size_t i = 0; i < groups.size(); ++i) {
    const LeakGroup& g = groups[i];
    if (i >= kMaxSitesPerSection) {
      omitted_bytes += g.bytes;
      ++omitted_sites;
      continue;
    }
    json kinds = json::object();
    for (int k = 0; k < kNumMemKinds; ++k) {
      if (g.kind_bytes[k] != 0) kinds[MemKindName(static_cast<MemKind>(k))] = g.kind_bytes[k];
    }
    json entry = {{key::kSite, g.stack_id},
                  {key::kLocation, sites->LocationOf(g.stack_id)},
                  {key::kBytes, g.bytes},
                  {key::kCount, g.count},
                  {"kinds", kinds},
                  {"oldest_ns", g.oldest_ns},
                  {key::kStack, sites->StackOf(g.stack_id)}};
    const SiteClass& c = sites->ClassOf(g.stack_id, suppressions, SuppressionKind::kLeak);
    AddSiteClass(c, &entry);
    split.Add(g.bytes, g.count, c.suppressed != nullptr, c.category);
    list.push_back(std::move(entry));
  }
  uint64_t total_bytes = 0;
  uint64_t total_count = 0;
  for (const LeakGroup& g : groups) {
    total_bytes += g.bytes;
    total_count += g.count;
  }
  json section = {{key::kBytes, total_bytes},
                  {key::kCount, total_count},
                  {key::kSites, list},
                  {key::kOmittedSites, omitted_sites},
                  {key::kOmittedBytes, omitted_bytes}};
  split.WriteTo(&section);
  return section;
}

json PeakSection(const TrackerSnapshot& snap, SiteResolver* sites) {
  std::unordered_map<uint32_t, uint64_t> merged;
  for (const auto& [id, bytes] : snap.peak_sites) merged[sites->Canonical(id)] += bytes;
  std::vector<std::pair<uint32_t, uint64_t>> peak(merged.begin(), merged.end());
  std::sort(peak.begin(), peak.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  json list = json::array();
  for (size_t i = 0; i < peak.size() && i < kMaxSitesPerSection; ++i) {
    list.push_back({{"site", peak[i].first},
                    {"location", sites->LocationOf(peak[i].first)},
                    {"bytes", peak[i].second},
                    {"stack", sites->StackOf(peak[i].first)}});
  }
  json kinds = json::object();
  for (int k = 0; k < kNumMemKinds; ++k) {
    kinds[MemKindName(static_cast<MemKind>(k))] = snap.kinds[k].peak_bytes;
  }
  return {{"device_bytes", snap.device_peak_bytes},
          {"sites_at_device_bytes", snap.peak_sites_device_bytes},
          {"sites_time_ns", snap.peak_sites_time_ns},
          {"kinds", kinds},
          {"sites", list}};
}

json SitesSection(const TrackerSnapshot& snap, SiteResolver* sites) {
  std::unordered_map<uint32_t, SiteTotals> merged;
  for (const auto& [id, t] : snap.sites) {
    SiteTotals& m = merged[sites->Canonical(id)];
    m.allocs += t.allocs;
    m.alloc_bytes += t.alloc_bytes;
    m.live_bytes += t.live_bytes;
    m.live_count += t.live_count;
    m.largest = std::max(m.largest, t.largest);
    m.host_allocs += t.host_allocs;
    m.host_alloc_bytes += t.host_alloc_bytes;
  }
  std::vector<std::pair<uint32_t, SiteTotals>> all(merged.begin(), merged.end());
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
    return a.second.alloc_bytes != b.second.alloc_bytes
               ? a.second.alloc_bytes > b.second.alloc_bytes
               : a.first < b.first;
  });
  json list = json::array();
  for (size_t i = 0; i < all.size() && i < kMaxSitesPerSection; ++i) {
    const SiteTotals& t = all[i].second;
    list.push_back({{"site", all[i].first},
                    {"location", sites->LocationOf(all[i].first)},
                    {"allocs", t.allocs},
                    {"alloc_bytes", t.alloc_bytes},
                    {"largest", t.largest},
                    {"live_device_bytes", t.live_bytes},
                    {"live_device_count", t.live_count},
                    {"host_allocs", t.host_allocs},
                    {"host_alloc_bytes", t.host_alloc_bytes},
                    {"stack", sites->StackOf(all[i].first)}});
  }
  return list;
}

json KernelsSection(const std::vector<KernelStats>& kernels, bool timing) {
  uint64_t launches = 0;
  json list = json::array();
  for (const KernelStats& k : kernels) {
    launches += k.launches;
    if (list.size() >= kMaxSitesPerSection) continue;
    json entry = {{"name", DemangleKernel(k.name)}, {"mangled", k.name}, {"launches", k.launches}};
    if (k.timed > 0) {
      entry["timed"] = k.timed;
      entry["gpu_ns"] = k.gpu_ns;
    }
    list.push_back(std::move(entry));
  }
  return {
      {"launches", launches}, {"distinct", kernels.size()}, {"timing", timing}, {"kernels", list}};
}

json LifecycleSection(const LifecycleFigures& l) {
  json blocked = json::object();
  uint64_t total = 0;
  for (int i = 0; i < kNumSyncKinds; ++i) {
    blocked[SyncKindName(static_cast<SyncKind>(i))] = {{"ns", l.sync_ns[i]},
                                                       {"count", l.sync_count[i]}};
    total += l.sync_ns[i];
  }
  blocked["total_ns"] = total;
  json j = {{"first_call_ns", l.first_call_ns},
            {"context_ready_ns", l.context_ready_ns},
            {"first_call_observed", l.first_call_observed},
            {"blocked", blocked}};
  j["init_latency_ns"] = l.context_ready_ns >= l.first_call_ns && l.context_ready_ns != 0
                             ? json(l.context_ready_ns - l.first_call_ns)
                             : json(nullptr);
  j["teardown_ns"] = l.teardown_ns >= 0 ? json(l.teardown_ns) : json(nullptr);
  j["exit_status"] = l.exit_status >= 0 ? json(l.exit_status) : json(nullptr);
  return j;
}

}  // namespace

std::string BuildReportJson(const TrackerSnapshot& snap, const ReportContext& context,
                            SiteResolver* sites, const ReportAnalysis& analysis) {
  sites->ClearFrameTable();
  json kinds = json::object();
  for (int i = 0; i < kNumMemKinds; ++i) {
    kinds[MemKindName(static_cast<MemKind>(i))] = KindJson(snap.kinds[i]);
  }
  json copies = json::object();
  for (int i = 0; i < kNumCopyKinds; ++i) {
    const CopyTotals c = CopiesOf(snap, context, static_cast<CopyKind>(i));
    if (c.count == 0) continue;
    copies[CopyKindName(static_cast<CopyKind>(i))] = json{{"count", c.count}, {"bytes", c.bytes}};
  }
  uint64_t live_device_count = 0;
  uint64_t live_host_count = 0;
  for (const LiveAlloc& a : snap.live) {
    (IsDeviceKind(a.kind) ? live_device_count : live_host_count) += 1;
  }
  uint64_t live_host_bytes = snap.kinds[static_cast<int>(MemKind::kPinnedHost)].current_bytes +
                             snap.kinds[static_cast<int>(MemKind::kRegisteredHost)].current_bytes;

  json report = {
      {key::kSchema, kReportSchemaName},
      {key::kVersion, kReportSchemaVersion},
      {key::kTrigger, context.trigger},
      {key::kLabel, context.label},
      {key::kGpuwatch,
       {{"version", kGpuwatchVersion},
        {"attach", context.attach_mode},
        {"cupti", context.cupti_path}}},
      {key::kProcess,
       {{"pid", context.pid},
        {"host", context.host},
        {"rank", context.rank},
        {"command", context.command},
        {"elapsed_ns", snap.time_ns}}},
      {key::kTotals,
       {{"device_current_bytes", snap.device_current_bytes},
        {"device_peak_bytes", snap.device_peak_bytes},
        {"device_live_count", live_device_count},
        {"host_current_bytes", live_host_bytes},
        {"host_live_count", live_host_count},
        {"unknown_frees", snap.unknown_frees},
        {"kernel_launches", snap.launches},
        {"kinds", kinds},
        {"copies", copies},
        {"dropped_allocs", snap.dropped_allocs},
        {"stacks_dropped", context.stacks_dropped},
        {"python_frames_dropped", context.python_frames_dropped},
        {"oom_count", context.oom_count}}},
      {key::kStackDepth, context.depth},
      {"tool_frames", context.tool_frames},
      {"unwinder", context.unwinder},
      {"unwind_fallbacks", context.unwind_fallbacks},
  };
  if (!context.pytorch_allocator.empty()) {
    report[key::kProcess]["pytorch_allocator"] = context.pytorch_allocator;
  }
  report[key::kLeaks] = {
      {key::kDevice, LeakSection(analysis.device_live, context.suppressions, sites)},
      {key::kHost, LeakSection(analysis.host_live, context.suppressions, sites)}};
  report[key::kPeak] = PeakSection(snap, sites);
  report[key::kSites] = SitesSection(snap, sites);
  if (context.timeline != nullptr) {
    report[key::kGrowth] = GrowthSection(*context.timeline, analysis, context.suppressions, sites);
    report[key::kTimeline] = TimelineSection(*context.timeline, sites);
  }
  if (context.transfers != nullptr) {
    report[key::kTransfers] = TransfersSection(*context.transfers, analysis, sites);
  }
  if (context.kernels != nullptr) {
    report[key::kKernels] = KernelsSection(*context.kernels, context.kernel_timing);
  }
  report[key::kLifecycle] = LifecycleSection(context.lifecycle);
  if (context.trace != nullptr) {
    report[key::kTrace] = TraceSectionJson(*context.trace, snap, sites);
  }
  if (context.oom != nullptr) {
    const OomInfo& oom = *context.oom;
    report[key::kOom] = {{"size", oom.size},
                         {"kind", MemKindName(oom.kind)},
                         {"api", oom.api},
                         {"error", oom.error},
                         {"device", oom.device},
                         {"device_free_bytes", oom.device_free},
                         {"device_total_bytes", oom.device_total},
                         {"site", oom.stack_id},
                         {"location", sites->LocationOf(oom.stack_id)},
                         {"stack", sites->StackOf(oom.stack_id)}};
  }
  report[key::kFrameTable] = FrameTableJson(sites->frame_table());
  return DumpReport(std::move(report));  // the trace's events compact
}

std::string BuildReportJson(const TrackerSnapshot& snap, const ReportContext& context,
                            SiteResolver* sites) {
  return BuildReportJson(snap, context, sites, AnalyzeReport(snap, context, sites));
}

}  // namespace gpuwatch
