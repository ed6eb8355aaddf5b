// What a report computes once and its sections and summary share
// (ReportAnalysis), and what it counts as leaked.
#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "libgpuwatch/report/report_sections.h"
#include "libgpuwatch/report/trace_json.h"

namespace gpuwatch {

namespace {

// Each group's phase: the one whose allocations hold most of its bytes (the
// lowest path id of equals). Nothing to do when no allocation has a phase.
bool InKinds(MemKind kind, uint32_t kinds) { return (kinds >> static_cast<int>(kind) & 1u) != 0; }

void AssignPhases(const std::vector<LiveAlloc>& live, uint32_t kinds, SiteResolver* sites,
                  const std::vector<uint32_t>& slot, std::vector<LeakGroup>* groups) {
  std::unordered_map<uint64_t, uint64_t> bytes;  // group index << 16 | phase -> bytes
  for (const LiveAlloc& a : live) {
    if (a.phase == 0 || !InKinds(a.kind, kinds)) continue;
    const uint64_t group = slot[sites->Canonical(a.stack_id)] - 1;
    bytes[group << 16 | a.phase] += a.size;
  }
  std::vector<uint64_t> best(groups->size(), 0);
  for (const auto& [key, b] : bytes) {
    LeakGroup& g = (*groups)[key >> 16];
    const auto phase = static_cast<uint32_t>(key & 0xffff);
    if (b > best[key >> 16] || (b == best[key >> 16] && phase < g.phase)) {
      best[key >> 16] = b;
      g.phase = phase;
    }
  }
}

// The live allocations of the kinds in `kinds` (a bit per MemKind), by site.
std::vector<LeakGroup> GroupLive(const std::vector<LiveAlloc>& live, uint32_t kinds,
                                 SiteResolver* sites) {
  // One pass over every live allocation: groups are found through a flat
  // table indexed by canonical id (ids are dense), not a hash map.
  std::vector<LeakGroup> out;
  std::vector<uint32_t> slot;  // canonical id -> index in out + 1; 0 = none yet
  for (const LiveAlloc& a : live) {
    if (!InKinds(a.kind, kinds)) continue;
    const uint32_t site = sites->Canonical(a.stack_id);
    if (site >= slot.size()) slot.resize(std::max<size_t>(site + 1, slot.size() * 2), 0);
    if (slot[site] == 0) {
      out.emplace_back().stack_id = site;
      slot[site] = static_cast<uint32_t>(out.size());
    }
    LeakGroup& g = out[slot[site] - 1];
    g.bytes += a.size;
    g.count += 1;
    g.kind_bytes[static_cast<int>(a.kind)] += a.size;
    g.oldest_ns = std::min(g.oldest_ns, uint64_t{a.time_ms} * 1000000);
  }
  AssignPhases(live, kinds, sites, slot, &out);
  std::sort(out.begin(), out.end(), [](const LeakGroup& a, const LeakGroup& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.stack_id < b.stack_id;
  });
  return out;
}

// The same from a capture by site (TrackerSnapshot::live_by_site): bytes,
// counts and bytes by kind; no oldest time and no phase (unknown).
std::vector<LeakGroup> GroupSites(const TrackerSnapshot& snap, uint32_t kinds,
                                  SiteResolver* sites) {
  std::unordered_map<uint32_t, LeakGroup> merged;
  for (const auto& [id, live] : snap.site_live) {
    uint64_t bytes = 0;
    for (int k = 0; k < kNumMemKinds; ++k) {
      if (InKinds(static_cast<MemKind>(k), kinds)) bytes += live.kind_bytes[k];
    }
    const uint64_t count = kinds == kDeviceKinds ? live.count
                           : kinds == kHostKinds ? live.host_count
                                                 : live.imported_count;
    if (count == 0) continue;
    LeakGroup& g = merged[sites->Canonical(id)];
    g.stack_id = sites->Canonical(id);
    g.bytes += bytes;
    g.count += count;
    for (int k = 0; k < kNumMemKinds; ++k) {
      if (InKinds(static_cast<MemKind>(k), kinds)) g.kind_bytes[k] += live.kind_bytes[k];
    }
  }
  std::vector<LeakGroup> out;
  out.reserve(merged.size());
  for (auto& [id, g] : merged) out.push_back(g);
  std::sort(out.begin(), out.end(), [](const LeakGroup& a, const LeakGroup& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.stack_id < b.stack_id;
  });
  return out;
}

// The live allocations of the kinds in `kinds`, by site, from whichever the
// snapshot holds.
std::vector<LeakGroup> LiveBySite(const TrackerSnapshot& snap, uint32_t kinds,
                                  SiteResolver* sites) {
  return snap.live_by_site ? GroupSites(snap, kinds, sites) : GroupLive(snap.live, kinds, sites);
}

// Transfer sites merged as the report shows them (Canonical), busiest first.
std::vector<std::pair<uint32_t, SiteTransfers>> MergedTransferSites(const TransfersSnapshot& t,
                                                                    SiteResolver* sites) {
  std::unordered_map<uint32_t, SiteTransfers> merged;
  for (const auto& [id, site] : t.sites) MergeInto(&merged[sites->Canonical(id)], site);
  std::vector<std::pair<uint32_t, SiteTransfers>> out(merged.begin(), merged.end());
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    if (a.second.all.duration_ns != b.second.all.duration_ns) {
      return a.second.all.duration_ns > b.second.all.duration_ns;
    }
    if (a.second.all.bytes != b.second.all.bytes) return a.second.all.bytes > b.second.all.bytes;
    return a.first < b.first;
  });
  return out;
}

}  // namespace

std::vector<ChurnSite> ChurnSites(const TrackerSnapshot& snap, SiteResolver* sites) {
  // Summed by canonical id in a flat table (the ids are dense): a process
  // whose 10,000 sites all churn paid ~6 M instructions a report for a hash
  // map of them. The list is sorted by a total order below, so the order
  // they are gathered in does not matter.
  struct Churn {
    uint64_t frees = 0;
    uint64_t churn_cycles = 0;
    uint64_t alloc_bytes = 0;
    uint64_t call_ns = 0;
  };
  std::vector<Churn> merged;
  for (const auto& [id, t] : snap.sites) {
    if (t.churn_cycles == 0) continue;
    const uint32_t canonical = sites->Canonical(id);
    if (canonical >= merged.size()) merged.resize(size_t{canonical} + 1);
    Churn& c = merged[canonical];
    c.frees += t.frees;
    c.churn_cycles += t.churn_cycles;
    c.alloc_bytes += t.alloc_bytes;
    c.call_ns += t.call_ns;
  }
  std::vector<ChurnSite> out;
  for (uint32_t id = 0; id < merged.size(); ++id) {
    const Churn& c = merged[id];
    if (c.churn_cycles < kAllocChurnMinCycles) continue;
    ChurnSite& site = out.emplace_back();
    site.stack_id = id;
    site.totals.frees = c.frees;
    site.totals.churn_cycles = c.churn_cycles;
    site.totals.alloc_bytes = c.alloc_bytes;
    site.totals.call_ns = c.call_ns;
  }
  std::sort(out.begin(), out.end(), [](const ChurnSite& a, const ChurnSite& b) {
    const SiteTotals& x = a.totals;
    const SiteTotals& y = b.totals;
    if (x.call_ns != y.call_ns) return x.call_ns > y.call_ns;
    return x.churn_cycles != y.churn_cycles ? x.churn_cycles > y.churn_cycles
                                            : a.stack_id < b.stack_id;
  });
  if (out.size() > kMaxChurnFindings) out.resize(kMaxChurnFindings);
  return out;
}

AllocChurn AllocChurnOf(const ChurnSite& c, SiteResolver* sites) {
  AllocChurn out;
  out.site = c.stack_id;
  out.count = c.totals.frees;
  out.cycles = c.totals.churn_cycles;
  out.bytes = c.totals.alloc_bytes;
  out.call_ns = c.totals.call_ns;
  out.location = sites->LocationOf(c.stack_id);
  return out;
}

ReportAnalysis AnalyzeReport(const TrackerSnapshot& snap, const ReportContext& context,
                             SiteResolver* sites) {
  std::vector<uint32_t> ids;
  for (const auto& [id, t] : snap.sites) ids.push_back(id);
  for (const LiveAlloc& a : snap.live) ids.push_back(a.stack_id);
  for (const auto& [id, live] : snap.site_live) ids.push_back(id);
  for (const auto& [id, bytes] : snap.peak_sites) ids.push_back(id);
  if (context.oom != nullptr) ids.push_back(context.oom->stack_id);
  if (context.transfers != nullptr) {
    for (const auto& [id, t] : context.transfers->sites) ids.push_back(id);
  }
  if (context.timeline != nullptr) {
    for (const auto* series : {&context.timeline->marks, &context.timeline->periodic}) {
      for (const GrowthSample& sample : *series) {
        for (const auto& [id, bytes] : sample.sites) ids.push_back(id);
      }
    }
  }
  if (context.trace != nullptr) {
    for (const uint32_t id : TraceSiteIds(*context.trace)) ids.push_back(id);
  }
  if (context.phases != nullptr) {
    for (const PhaseStats::Row& r : context.phases->rows) {
      ids.push_back(r.peak_site);
      ids.push_back(r.top_site);
    }
  }
  if (context.regions != nullptr) {
    for (const PoolRegion& r : context.regions->live) ids.push_back(r.stack_id);
    for (const PoolHeap& h : context.regions->heaps) ids.push_back(h.stack_id);
  }
  sites->Prepare(std::move(ids));
  ReportAnalysis analysis;
  analysis.device_live = LiveBySite(snap, kDeviceKinds, sites);
  analysis.host_live = LiveBySite(snap, kHostKinds, sites);
  analysis.imported_live = LiveBySite(snap, kImportedKinds, sites);
  if (context.transfers != nullptr) {
    analysis.transfer_sites = MergedTransferSites(*context.transfers, sites);
    analysis.transfer_findings =
        FindTransferIssues(analysis.transfer_sites, context.transfers->best_gbps);
  }
  if (context.timeline != nullptr) {
    const TimelineSnapshot& t = *context.timeline;
    const bool by_mark = !t.marks.empty();
    analysis.growth_suspects = FindGrowthSuspects(
        by_mark ? t.marks : t.periodic, by_mark ? GrowthUnit::kMark : GrowthUnit::kSecond,
        [sites](uint32_t id) { return sites->Canonical(id); });
  }
  analysis.churn = ChurnSites(snap, sites);
  return analysis;
}

uint64_t LeakedDeviceBytes(const ReportAnalysis& analysis, SiteResolver* sites,
                           const Suppressions* suppressions) {
  // As in the report: only the listed sites are classified; the rest count
  // as leaked.
  LeakSplitFigures split;
  uint64_t bytes = 0;
  const std::vector<LeakGroup>& groups = analysis.device_live;
  for (size_t i = 0; i < groups.size(); ++i) {
    bytes += groups[i].bytes;
    if (i >= kMaxSitesPerSection) continue;
    const SiteClass& c = sites->ClassOf(groups[i].stack_id, suppressions, SuppressionKind::kLeak);
    split.Add(groups[i].bytes, groups[i].count, c.suppressed != nullptr, c.category);
  }
  return split.LeakedBytesOf(bytes);
}

}  // namespace gpuwatch
