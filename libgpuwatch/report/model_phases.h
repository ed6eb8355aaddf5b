// The report's `phases` and `regions` sections as types (docs/report-format.md,
// "Phases" and "Pool regions"): their fields, the rules that merge their
// counts, and their one JSON writer and reader. Part of the report model:
// report_model.h includes this file where the types it uses (ReportSite,
// CountField, CopyRow) are declared, so include report_model.h.
#ifndef GPUWATCH_LIBGPUWATCH_REPORT_MODEL_PHASES_H_
#define GPUWATCH_LIBGPUWATCH_REPORT_MODEL_PHASES_H_

#ifndef GPUWATCH_LIBGPUWATCH_REPORT_REPORT_MODEL_H_
#error "include libgpuwatch/report/report_model.h, which includes model_phases.h"
#endif

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace gpuwatch {

class ReportFieldReader;

// A site named by its id and location alone (no stack): a phase's peak
// sites, a region site's segment.
struct ReportSiteRef {
  uint64_t site = 0;  // merge renumbers
  std::string location;
};

// phases.paths[].peak_top_site: the site that held most at the peak.
struct PhaseTopSite : ReportSiteRef {
  uint64_t bytes = 0;
};

// phases.paths[]: one phase path. Counts are the phase's own, peak_bytes
// the device memory while it was open (nested phases included): merged, the
// highest of any one process, with that process's peak_pid, peak_rank and
// peak sites.
// clang-format off
#define GPUWATCH_PHASE_PATH_COUNTS(X)                                                        \
  X(opens, kSum) X(allocs, kSum) X(alloc_bytes, kSum) X(host_allocs, kSum)                   \
  X(host_alloc_bytes, kSum) X(live_bytes, kSum) X(live_count, kSum) X(host_live_bytes, kSum) \
  X(host_live_count, kSum) X(peak_bytes, kMax) X(launches, kSum)
// clang-format on
struct PhasePath {
  std::string path;    // "a/b/c"; never empty
  uint64_t depth = 0;  // its ranges (a name may hold '/' itself); merge: the first's
  GPUWATCH_COUNTS(PhasePath, GPUWATCH_PHASE_PATH_COUNTS)
  std::map<std::string, CopyRow, std::less<>> copies;  // by direction, those with copies
  std::optional<ReportSiteRef> peak_site;              // the allocation that reached the peak
  std::optional<PhaseTopSite> peak_top_site;
  // Merged reports: in how many reports the path is (0: absent), and the
  // process whose peak peak_bytes is.
  uint64_t processes = 0;
  std::optional<uint64_t> peak_pid;
  std::string peak_rank;  // "": absent
};

// The section's counters: ranges and names past gpuwatch's limits, pops and
// ends of no open range, peak sites not tracked.
// clang-format off
#define GPUWATCH_PHASES_COUNTS(X)                                                          \
  X(names_dropped, kSum) X(paths_dropped, kSum) X(too_deep, kSum) X(unbalanced_pops, kSum) \
  X(open_at_thread_exit, kSum) X(ranges_not_tracked, kSum) X(unmatched_ends, kSum)         \
  X(peak_sites_untracked, kSum)
// clang-format on
struct ReportPhases {
  std::vector<PhasePath> paths;  // each after the path it is nested in (PhasePathBefore)
  GPUWATCH_COUNTS(ReportPhases, GPUWATCH_PHASES_COUNTS)
  // False in a report from a capture by site (out of memory, a context
  // destroyed), which does not know the phases of what was live: the paths'
  // live_* figures are absent (and read as 0). Read back as whether the
  // first path has live_bytes.
  bool live_known = true;
};

// regions.sites[]: live pool regions of one registering stack.
// clang-format off
#define GPUWATCH_REGION_SITE_COUNTS(X)                                    \
  X(count, kSum) X(bytes, kSum) X(oldest_ns, kMin) X(outside_count, kSum) \
  X(outside_bytes, kSum)
// clang-format on
struct RegionSite : ReportSite {
  GPUWATCH_COUNTS(RegionSite, GPUWATCH_REGION_SITE_COUNTS)
  std::string caller;                    // "": absent
  std::string phase;                     // "": absent
  std::optional<ReportSiteRef> segment;  // the allocation holding most of its bytes
};

// regions.segments[] (an allocation holding live regions) and
// regions.heaps[] (a registered heap): the site that made it.
// clang-format off
#define GPUWATCH_REGION_HOLDER_COUNTS(X) X(size, kSum) X(region_count, kSum) X(region_bytes, kSum)
// clang-format on
struct RegionSegment : ReportSite {
  GPUWATCH_COUNTS(RegionSegment, GPUWATCH_REGION_HOLDER_COUNTS)
  std::string address;  // hexadecimal text
  std::string kind;     // as totals.kinds
};
struct RegionHeap : ReportSite {
  GPUWATCH_COUNTS(RegionHeap, GPUWATCH_REGION_HOLDER_COUNTS)
  std::string address;
};

// regions.counters.
// clang-format off
#define GPUWATCH_REGION_COUNTERS(X)                                                     \
  X(registered, kSum) X(unregistered, kSum) X(resized, kSum) X(released_by_reset, kSum) \
  X(replaced, kSum) X(unknown_unregisters, kSum) X(unknown_resizes, kSum)               \
  X(unknown_heaps, kSum) X(dropped, kSum) X(heaps_registered, kSum)                     \
  X(heaps_unregistered, kSum) X(heaps_reset, kSum) X(heaps_dropped, kSum)
// clang-format on
struct ReportRegionCounters {
  GPUWATCH_COUNTS(ReportRegionCounters, GPUWATCH_REGION_COUNTERS)
};

// clang-format off
#define GPUWATCH_REGIONS_COUNTS(X)                               \
  X(live_count, kSum) X(live_bytes, kSum) X(outside_count, kSum) \
  X(outside_bytes, kSum) X(omitted_sites, kSum) X(omitted_bytes, kSum)
// clang-format on
struct ReportRegions {
  GPUWATCH_COUNTS(ReportRegions, GPUWATCH_REGIONS_COUNTS)
  std::vector<RegionSite> sites;  // most bytes first
  std::vector<RegionSegment> segments;
  std::vector<RegionHeap> heaps;
  ReportRegionCounters counters;

  // Calls `fn` on every entry with a stack (ReportModel::ForEachSite).
  void ForEachSite(const std::function<void(ReportSite&)>& fn);
};

// The sections as ReportModel::ToJson writes them.
nlohmann::json PhasesJson(const ReportPhases& phases);
nlohmann::json RegionsJson(const ReportRegions& regions);

// The sections as ReadReportModel reads them: every field's type checked,
// the first problem recorded in `r` with its path ("phases.paths[2].peak_bytes").
ReportPhases ReadPhases(ReportFieldReader* r, const nlohmann::json& phases);
ReportRegions ReadRegions(ReportFieldReader* r, const nlohmann::json& regions);

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_REPORT_MODEL_PHASES_H_
