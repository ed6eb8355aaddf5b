// The `phases` section: memory, copies and launches per phase (the path of
// NVTX ranges or gpuwatch_phase_push ranges open on the thread).
#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "libgpuwatch/report/report_schema.h"
#include "libgpuwatch/report/report_sections.h"

namespace gpuwatch {

using json = nlohmann::json;

json PhasesSection(const PhasesSnapshot& p, const TrackerSnapshot& snap, SiteResolver* sites) {
  struct Live {
    uint64_t bytes = 0;
    uint64_t count = 0;
    uint64_t host_bytes = 0;
    uint64_t host_count = 0;
  };
  std::vector<Live> live(p.rows.size());
  for (const LiveAlloc& a : snap.live) {
    if (a.phase == 0) continue;
    const int i = p.IndexOf(a.phase);
    if (i < 0) continue;
    Live& l = live[static_cast<size_t>(i)];
    if (IsDeviceKind(a.kind)) {
      l.bytes += a.size;
      ++l.count;
    } else if (IsHostKind(a.kind)) {
      l.host_bytes += a.size;
      ++l.host_count;
    }
  }
  // Paths in text order: each one after the path it is nested in.
  std::vector<size_t> order(p.rows.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return PhasePathBefore(p.paths[a], p.paths[b]); });
  json paths = json::array();
  for (const size_t i : order) {
    const PhaseStats::Row& r = p.rows[i];
    json e = {{"path", p.paths[i]},
              {"depth", p.depths[i]},
              {"opens", r.opens},
              {"allocs", r.allocs},
              {"alloc_bytes", r.alloc_bytes},
              {"host_allocs", r.host_allocs},
              {"host_alloc_bytes", r.host_alloc_bytes},
              {"peak_bytes", r.peak_bytes},
              {"launches", r.launches}};
    if (!snap.live_by_site) {  // a capture by site does not know the phases of what was live
      e["live_bytes"] = live[i].bytes;
      e["live_count"] = live[i].count;
      e["host_live_bytes"] = live[i].host_bytes;
      e["host_live_count"] = live[i].host_count;
    }
    if (r.peak_site != 0) {
      const uint32_t site = sites->Canonical(r.peak_site);
      e["peak_site"] = {{"site", site}, {"location", sites->LocationOf(site)}};
    }
    if (r.top_site != 0) {
      const uint32_t site = sites->Canonical(r.top_site);
      e["peak_top_site"] = {
          {"site", site}, {"location", sites->LocationOf(site)}, {"bytes", r.top_bytes}};
    }
    json copies = json::object();
    for (int k = 0; k < kNumCopyKinds; ++k) {
      if (r.copy_count[k] == 0) continue;
      copies[CopyKindName(static_cast<CopyKind>(k))] = {{"count", r.copy_count[k]},
                                                        {"bytes", r.copy_bytes[k]}};
    }
    e["copies"] = std::move(copies);
    paths.push_back(std::move(e));
  }
  const PhaseTable::Counters& c = p.counters;
  return {{"paths", std::move(paths)},
          {"names_dropped", c.names_dropped},
          {"paths_dropped", c.paths_dropped},
          {"too_deep", c.too_deep},
          {"unbalanced_pops", c.unbalanced_pops},
          {"open_at_thread_exit", c.open_at_thread_exit},
          {"ranges_not_tracked", c.ranges_not_tracked},
          {"unmatched_ends", c.unmatched_ends},
          {"peak_sites_untracked", p.cells_dropped}};
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
