// The `phases` section: memory, copies and launches per phase (the path of
// NVTX ranges or gpuwatch_phase_push ranges open on the thread).
#include <algorithm>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "libgpuwatch/report/report_schema.h"
#include "libgpuwatch/report/report_sections.h"

namespace gpuwatch {

ReportPhases PhasesSection(const PhasesSnapshot& p, const TrackerSnapshot& snap,
                           SiteResolver* sites) {
  std::vector<PhasePath> rows(p.rows.size());
  for (const LiveAlloc& a : snap.live) {
    if (a.phase == 0) continue;
    const int i = p.IndexOf(a.phase);
    if (i < 0) continue;
    PhasePath& l = rows[static_cast<size_t>(i)];
    if (IsDeviceKind(a.kind)) {
      l.live_bytes += a.size;
      ++l.live_count;
    } else if (IsHostKind(a.kind)) {
      l.host_live_bytes += a.size;
      ++l.host_live_count;
    }
  }
  // Paths in text order: each one after the path it is nested in.
  std::vector<size_t> order(p.rows.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return PhasePathBefore(p.paths[a], p.paths[b]); });
  ReportPhases out;
  // A capture by site (an OOM or context report) does not know the phases of
  // what was live: its live_* figures are left out.
  out.live_known = !snap.live_by_site;
  for (const size_t i : order) {
    const PhaseStats::Row& r = p.rows[i];
    PhasePath& e = out.paths.emplace_back(std::move(rows[i]));
    e.path = p.paths[i];
    e.depth = p.depths[i];
    e.opens = r.opens;
    e.allocs = r.allocs;
    e.alloc_bytes = r.alloc_bytes;
    e.host_allocs = r.host_allocs;
    e.host_alloc_bytes = r.host_alloc_bytes;
    e.peak_bytes = r.peak_bytes;
    e.launches = r.launches;
    if (r.peak_site != 0) {
      const uint32_t site = sites->Canonical(r.peak_site);
      e.peak_site = ReportSiteRef{site, sites->LocationOf(site)};
    }
    if (r.top_site != 0) {
      const uint32_t site = sites->Canonical(r.top_site);
      e.peak_top_site = PhaseTopSite{{site, sites->LocationOf(site)}, r.top_bytes};
    }
    for (int k = 0; k < kNumCopyKinds; ++k) {
      if (r.copy_count[k] == 0) continue;
      e.copies[CopyKindName(static_cast<CopyKind>(k))] = {r.copy_count[k], r.copy_bytes[k]};
    }
  }
  const PhaseTable::Counters& c = p.counters;
  out.names_dropped = c.names_dropped;
  out.paths_dropped = c.paths_dropped;
  out.too_deep = c.too_deep;
  out.unbalanced_pops = c.unbalanced_pops;
  out.open_at_thread_exit = c.open_at_thread_exit;
  out.ranges_not_tracked = c.ranges_not_tracked;
  out.unmatched_ends = c.unmatched_ends;
  out.peak_sites_untracked = p.cells_dropped;
  return out;
}

std::string PhaseSummary(const PhasesSnapshot& p) {
  // The phase with the highest peak; of equals, the innermost (the most
  // specific), then the first opened.
  const PhaseStats::Row* top = nullptr;
  size_t top_depth = 0;
  for (size_t i = 0; i < p.rows.size(); ++i) {
    const size_t depth = p.depths[i];
    if (top == nullptr || p.rows[i].peak_bytes > top->peak_bytes ||
        (p.rows[i].peak_bytes == top->peak_bytes && depth > top_depth)) {
      top = &p.rows[i];
      top_depth = depth;
    }
  }
  if (top == nullptr) return "";
  return "gpuwatch: phases: " + CountOf(p.rows.size(), "phase", "phases") + "; highest peak " +
         FormatBytes(top->peak_bytes) + " in " + p.paths[static_cast<size_t>(top - p.rows.data())] +
         "\n";
}

}  // namespace gpuwatch
