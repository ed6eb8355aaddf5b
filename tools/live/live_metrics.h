// The live state of the processes under gpuwatch (tools/live/live_client.h) as
// Prometheus metric families, for `gpuwatch exporter` (docs/prometheus.md has
// the list). Pure: the same scan gives the same families.
#ifndef GPUWATCH_TOOLS_LIVE_LIVE_METRICS_H_
#define GPUWATCH_TOOLS_LIVE_LIVE_METRICS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "prometheus/metric_family.h"
#include "tools/live/live_client.h"

namespace gpuwatch::tools {

struct LiveMetricsOptions {
  // Sites per process, the largest by live bytes; the rest are one series,
  // site="other". The scan must have asked for at least as many.
  size_t top = 20;
  // No CUDA activity for this long makes a process idle (live_holders.h).
  uint64_t idle_after_ns = 600000000000ULL;
};

// Every metric family, in a fixed order, each with its HELP text; a family
// with no series is left out (Prometheus wants none empty), except
// gpuwatch_exporter_scrape_problems and gpuwatch_exporter_processes, always
// there. A process that did not answer (LiveScan::silent) has only the
// gpuwatch_process_* series of its state and of what is known of it. No family holds one label set
// twice (Prometheus refuses the whole scrape then): of series that would, the first is kept.
std::vector<prometheus::MetricFamily> LiveMetrics(const LiveScan& scan,
                                                  const LiveMetricsOptions& options);

// The `command` label of a process: its program's base name and its
// arguments, joined by spaces, cut to at most `max_bytes` bytes (whole UTF-8
// characters) ending in "...".
std::string CommandLabel(const std::vector<std::string>& command, size_t max_bytes = 60);

// The `site` label: "file:line (function)", or the location alone.
std::string SiteLabel(const LiveSite& site);

}  // namespace gpuwatch::tools

#endif  // GPUWATCH_TOOLS_LIVE_LIVE_METRICS_H_
