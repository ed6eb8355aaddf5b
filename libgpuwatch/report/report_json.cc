// The report document (BuildReportJson) and its sections of memory,
// kernels, lifecycle and oom; report_growth.cc, report_transfers.cc and
// report_trace.cc build the others.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "libgpuwatch/base/memory_reserve.h"
#include "libgpuwatch/base/version.h"
#include "libgpuwatch/report/checkpoint_text.h"
#include "libgpuwatch/report/report_model.h"
#include "libgpuwatch/report/report_schema.h"
#include "libgpuwatch/report/report_sections.h"
#include "libgpuwatch/report/trace_json.h"

namespace gpuwatch {

using nlohmann::json;
namespace key = report_key;

void FillSite(uint32_t id, const SiteClass* c, SiteResolver* sites, ReportSite* out) {
  out->site = id;
  out->location = sites->LocationOf(id);
  out->stack = sites->StackOf(id);
  if (c == nullptr) return;
  if (!c->category.empty() || c->category_off) out->category = std::string(c->category);
  if (c->suppressed != nullptr) out->suppressed = c->suppressed->Text();
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

// A leaks section: its sites, largest first, each marked with its category
// and suppression, and its bytes split into leaked, suppressed and kept by
// libraries (LeakSplitFigures; omitted sites count as leaked).
LeakList LeakSection(const std::vector<LeakGroup>& groups, const Suppressions* suppressions,
                     const PhasesSnapshot* phases, SiteResolver* sites) {
  LeakList out;
  for (size_t i = 0; i < groups.size(); ++i) {
    const LeakGroup& g = groups[i];
    out.bytes += g.bytes;
    out.count += g.count;
    if (i >= kMaxSitesPerSection) {
      out.omitted_bytes += g.bytes;
      ++out.omitted_sites;
      continue;
    }
    LeakSite& site = out.sites.emplace_back();
    const SiteClass& c = sites->ClassOf(g.stack_id, suppressions, SuppressionKind::kLeak);
    FillSite(g.stack_id, &c, sites, &site);
    site.bytes = g.bytes;
    site.count = g.count;
    site.oldest_ns = g.oldest_ns;
    if (const int p = phases != nullptr ? phases->IndexOf(g.phase) : -1; p >= 0) {
      site.phase = phases->paths[p];
    }
    for (int k = 0; k < kNumMemKinds; ++k) {
      if (g.kind_bytes[k] != 0) site.kinds[MemKindName(static_cast<MemKind>(k))] = g.kind_bytes[k];
    }
    out.split.Add(g.bytes, g.count, c.suppressed != nullptr, c.category);
  }
  return out;
}

// Keeps the first kMaxSitesPerSection of `rows` in `less`'s order and drops
// the rest: a partial sort, n log 1,000 rather than n log n for a process's
// 10,000 sites; `less` is a total order, so the list is a full sort's.
template <typename T, typename Less>
void SortListed(std::vector<T>* rows, Less less) {
  const auto listed =
      rows->begin() + static_cast<ptrdiff_t>(std::min(rows->size(), kMaxSitesPerSection));
  std::partial_sort(rows->begin(), listed, rows->end(), less);
  rows->erase(listed, rows->end());
}

// `rows` (by stack id) merged by canonical id with `add` into a value
// first made as T{}, in first-seen order. The row of each canonical id is
// found in a flat table (ids are dense, 4 bytes each): a checkpoint's 10,000
// sites in a hash map cost ~4 M instructions a section. Callers rank the
// result by a total order, so the order here does not matter.
template <typename T, typename Add>
std::vector<std::pair<uint32_t, T>> MergeByCanonical(
    const std::vector<std::pair<uint32_t, T>>& rows, SiteResolver* sites, const Add& add) {
  constexpr uint32_t kNoRow = UINT32_MAX;
  std::vector<uint32_t> row_of;
  std::vector<std::pair<uint32_t, T>> out;
  out.reserve(rows.size());
  for (const auto& [id, value] : rows) {
    const uint32_t canonical = sites->Canonical(id);
    if (canonical >= row_of.size()) row_of.resize(size_t{canonical} + 1, kNoRow);
    uint32_t& row = row_of[canonical];
    if (row == kNoRow) {
      row = static_cast<uint32_t>(out.size());
      out.emplace_back(canonical, T{});
    }
    add(&out[row].second, value);
  }
  return out;
}

ReportPeak PeakSection(const TrackerSnapshot& snap, SiteResolver* sites) {
  std::vector<std::pair<uint32_t, uint64_t>> peak =
      MergeByCanonical(snap.peak_sites, sites, [](uint64_t* m, uint64_t bytes) { *m += bytes; });
  SortListed(&peak, [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  ReportPeak out;
  for (size_t i = 0; i < peak.size() && i < kMaxSitesPerSection; ++i) {
    PeakSite& site = out.sites.emplace_back();
    FillSite(peak[i].first, nullptr, sites, &site);
    site.bytes = peak[i].second;
  }
  for (int k = 0; k < kNumMemKinds; ++k) {
    out.kinds[MemKindName(static_cast<MemKind>(k))] = snap.peak_kinds[k];
  }
  out.device_bytes = snap.device_peak_bytes;
  out.sites_at_device_bytes = snap.peak_sites_device_bytes;
  out.sites_time_ns = snap.peak_sites_time_ns;
  return out;
}

std::vector<AllocSite> SitesSection(const TrackerSnapshot& snap, SiteResolver* sites) {
  // Merged and ranked as the tracker's plain totals; only the sites listed
  // become AllocSites (strings, vectors): a process's 10,000 sites cost a
  // checkpoint 10,000 heap blocks and sorting whole AllocSites otherwise.
  std::vector<std::pair<uint32_t, SiteTotals>> ranked =
      MergeByCanonical(snap.sites, sites, [](SiteTotals* into, const SiteTotals& t) {
        SiteTotals& m = *into;
        m.allocs += t.allocs;
        m.alloc_bytes += t.alloc_bytes;
        m.live_bytes += t.live_bytes;
        m.live_count += t.live_count;
        m.largest = std::max(m.largest, t.largest);
        m.host_allocs += t.host_allocs;
        m.host_alloc_bytes += t.host_alloc_bytes;
        m.frees += t.frees;
        m.churn_cycles += t.churn_cycles;
        m.call_ns += t.call_ns;
        for (size_t b = 0; b < t.sizes.size(); ++b) m.sizes[b] += t.sizes[b];
      });
  SortListed(&ranked, [](const auto& a, const auto& b) {
    return a.second.alloc_bytes != b.second.alloc_bytes
               ? a.second.alloc_bytes > b.second.alloc_bytes
               : a.first < b.first;
  });
  static_assert(kSizeBucketCount == kSizeBuckets);
  std::vector<AllocSite> out(ranked.size());
  for (size_t i = 0; i < ranked.size(); ++i) {
    const auto& [id, t] = ranked[i];
    AllocSite& site = out[i];
    site.allocs = t.allocs;
    site.alloc_bytes = t.alloc_bytes;
    site.live_device_bytes = t.live_bytes;
    site.live_device_count = t.live_count;
    site.largest = t.largest;
    site.host_allocs = t.host_allocs;
    site.host_alloc_bytes = t.host_alloc_bytes;
    site.frees = t.frees;
    site.churn_cycles = t.churn_cycles;
    site.call_ns = t.call_ns;
    site.sizes.assign(t.sizes.begin(), t.sizes.end());
    // Frames for the sites listed only: each adds to the report's frame table.
    FillSite(id, nullptr, sites, &site);
  }
  return out;
}

ReportKernels KernelsSection(const std::vector<KernelStats>& kernels, bool timing) {
  ReportKernels out;
  out.distinct = kernels.size();
  out.timing = timing;
  for (const KernelStats& k : kernels) {
    out.launches += k.launches;
    if (out.kernels.size() >= kMaxSitesPerSection) continue;
    KernelRow& row = out.kernels.emplace_back();
    row.name = DemangleKernel(k.name);
    row.mangled = k.name;
    row.launches = k.launches;
    if (k.timed > 0) {
      row.timed = k.timed;
      row.gpu_ns = k.gpu_ns;
    }
  }
  return out;
}

ReportLifecycle LifecycleSection(const LifecycleFigures& l) {
  ReportLifecycle out;
  for (int i = 0; i < kNumSyncKinds; ++i) {
    out.blocked[SyncKindName(static_cast<SyncKind>(i))] = {l.sync_ns[i], l.sync_count[i]};
    out.blocked_total_ns += l.sync_ns[i];
  }
  out.first_call_ns = l.first_call_ns;
  out.context_ready_ns = l.context_ready_ns;
  out.first_call_observed = l.first_call_observed;
  if (l.context_ready_ns >= l.first_call_ns && l.context_ready_ns != 0) {
    out.init_latency_ns = l.context_ready_ns - l.first_call_ns;
  }
  if (l.first_launch_ns >= l.first_call_ns && l.first_launch_ns != 0) {
    out.cold_start_ns = l.first_launch_ns - l.first_call_ns;
  }
  if (l.teardown_ns >= 0) out.teardown_ns = static_cast<uint64_t>(l.teardown_ns);
  if (l.exit_status >= 0) out.exit_status = l.exit_status;
  out.first_launch_ns = l.first_launch_ns;
  out.contexts = {l.contexts_created, l.contexts_destroyed, l.context_freed_count,
                  l.context_freed_bytes, l.context_destroys_kept};
  if (l.contexts_destroyed >= kContextChurnMin) {
    LifecycleFinding& f = out.findings.emplace_back();
    f.type = "context_churn";
    f.contexts_created = l.contexts_created;
    f.contexts_destroyed = l.contexts_destroyed;
  }
  return out;
}

}  // namespace

std::string BuildReportJson(const TrackerSnapshot& snap, const ReportContext& context,
                            SiteResolver* sites, const ReportAnalysis& analysis,
                            const TextFlush* flush) {
  // A checkpoint's frames keep their indices from one checkpoint to the next
  // (its kept text is by index); any other report numbers its own.
  struct FrameTableMode {
    SiteResolver* sites;
    explicit FrameTableMode(SiteResolver* s, bool keep) : sites(s) {
      sites->ClearFrameTable();
      sites->KeepFrameTable(keep);
    }
    ~FrameTableMode() { sites->KeepFrameTable(false); }
    FrameTableMode(const FrameTableMode&) = delete;
    FrameTableMode& operator=(const FrameTableMode&) = delete;
  } mode(sites, context.kept != nullptr);
  ReportModel m;
  m.trigger = context.trigger;
  m.label = context.label;
  m.gpuwatch_version = kGpuwatchVersion;
  m.attach = context.attach_mode;
  m.recording_stopped = context.recording_stopped;
  m.recording_stopped_ns = context.recording_stopped_ns;
  m.cupti = context.cupti_path;
  m.process.pid = static_cast<uint64_t>(context.pid);
  m.process.host = context.host;
  m.process.rank = context.rank;
  m.process.command = context.command;
  m.process.elapsed_ns = snap.time_ns;
  m.process.pytorch_allocator = context.pytorch_allocator;
  ReportTotals& t = m.totals;
  for (int i = 0; i < kNumMemKinds; ++i) {
    const KindTotals& k = snap.kinds[i];
    t.kinds[MemKindName(static_cast<MemKind>(i))] = {k.current_bytes, k.current_count, k.peak_bytes,
                                                     k.allocs,        k.alloc_bytes,   k.frees};
  }
  for (int i = 0; i < kNumCopyKinds; ++i) {
    const CopyTotals c = CopiesOf(snap, context, static_cast<CopyKind>(i));
    if (c.count != 0) t.copies[CopyKindName(static_cast<CopyKind>(i))] = {c.count, c.bytes};
  }
  for (const LiveAlloc& a : snap.live) {
    if (IsDeviceKind(a.kind)) ++t.device_live_count;
    if (IsHostKind(a.kind)) ++t.host_live_count;
  }
  for (const auto& [id, live] : snap.site_live) {
    t.device_live_count += live.count;
    t.host_live_count += live.host_count;
  }
  t.device_current_bytes = snap.device_current_bytes;
  t.device_peak_bytes = snap.device_peak_bytes;
  t.host_current_bytes = snap.kinds[static_cast<int>(MemKind::kPinnedHost)].current_bytes +
                         snap.kinds[static_cast<int>(MemKind::kRegisteredHost)].current_bytes;
  t.unknown_frees = snap.unknown_frees;
  t.kernel_launches = snap.launches;
  t.dropped_allocs = snap.dropped_allocs;
  t.stacks_dropped = context.stacks_dropped;
  t.python_frames_dropped = context.python_frames_dropped;
  t.oom_count = context.oom_count;
  m.stack_depth = context.depth;
  m.unwind = ReportUnwind{static_cast<uint64_t>(std::max(context.tool_frames, 0)), context.unwinder,
                          context.unwind_fallbacks};
  m.leaks_device = LeakSection(analysis.device_live, context.suppressions, context.phases, sites);
  ThrowIfOutOfMemory();
  m.leaks_host = LeakSection(analysis.host_live, context.suppressions, context.phases, sites);
  ThrowIfOutOfMemory();
  m.leaks_ipc_imported =
      LeakSection(analysis.imported_live, context.suppressions, context.phases, sites);
  ThrowIfOutOfMemory();
  m.peak = PeakSection(snap, sites);
  ThrowIfOutOfMemory();
  m.sites = SitesSection(snap, sites);
  ThrowIfOutOfMemory();
  if (context.oom != nullptr) {
    const OomInfo& oom = *context.oom;
    OomSite& o = m.oom.emplace();
    FillSite(oom.stack_id, nullptr, sites, &o);
    o.size = oom.size;
    o.kind = MemKindName(oom.kind);
    o.api = oom.api;
    o.error = oom.error;
    o.device = oom.device;
    o.device_free_bytes = oom.device_free;
    o.device_total_bytes = oom.device_total;
    o.graph_pool_idle_bytes = oom.graph_pool_idle;
    if (oom.has_torch) {
      o.torch.emplace();
      o.torch->allocated_bytes = oom.torch_allocated;
      o.torch->reserved_bytes = oom.torch_reserved;
    }
  }
  if (context.cuda_errors != nullptr && !context.cuda_errors->empty()) {
    m.cuda_errors = CudaErrorsSection(*context.cuda_errors, sites);
  }
  if (context.timeline != nullptr) {
    m.growth =
        GrowthSection(*context.timeline, analysis, context.suppressions, context.phases, sites);
    m.timeline = TimelineSection(*context.timeline, sites);
    ThrowIfOutOfMemory();
  }
  if (context.transfers != nullptr) {
    m.transfers = TransfersSection(*context.transfers, analysis, sites);
    ThrowIfOutOfMemory();
  }
  if (context.kernels != nullptr) {
    m.kernels = KernelsSection(*context.kernels, context.kernel_timing);
    ThrowIfOutOfMemory();
  }
  m.lifecycle = LifecycleSection(context.lifecycle);
  for (const ChurnSite& c : analysis.churn) {
    LifecycleFinding& f = m.lifecycle->findings.emplace_back();
    f.type = kAllocChurnType;
    f.churn = AllocChurnOf(c, sites);
  }
  ThrowIfOutOfMemory();
  // The sections the model does not type.
  json report = json::object();
  if (context.phases != nullptr && !context.phases->empty()) {
    m.phases = PhasesSection(*context.phases, snap, sites);
    ThrowIfOutOfMemory();
  }
  if (context.regions != nullptr && !context.regions->empty()) {
    m.regions = RegionsSection(*context.regions, snap, context.phases, sites);
    ThrowIfOutOfMemory();
  }
  if (context.torch_blocks != nullptr) {
    m.torch_blocks = TorchBlocksSection(*context.torch_blocks, snap, sites);
    ThrowIfOutOfMemory();
  }
  if (context.trace != nullptr) {
    m.trace = ReportTraceOf(*context.trace, snap, sites, context.phases, context.device_identity);
    ThrowIfOutOfMemory();
  }
  // Last: every section above has named its frames.
  if (CheckpointText* kept = context.kept; kept != nullptr) {
    kept->MadeFrom(EventCountOf(snap), snap.device_peak_bytes);
    kept->UseFor(sites->serial());
    kept->AddFrames(sites->frame_table());
    if (m.trace.has_value()) {
      kept->AddTraceSites(m.trace->sites);
      kept->trace_lines().Begin(*context.trace, *m.trace, sites->serial(),
                                sites->recanonicalized());
    }
    // The rows are packed for the next checkpoint by the caller, once the
    // report's own memory is freed (ReleaseRows).
    kept->TakeRows(&m);
    return m.Dump(std::move(report), flush, kept);
  }
  for (const Frame* f : sites->frame_table()) m.frame_table.push_back(ReportFrameOf(*f));
  return m.Dump(std::move(report), flush);  // the trace's events compact, from their structs
}

std::string BuildReportJson(const TrackerSnapshot& snap, const ReportContext& context,
                            SiteResolver* sites) {
  return BuildReportJson(snap, context, sites, AnalyzeReport(snap, context, sites));
}

}  // namespace gpuwatch
