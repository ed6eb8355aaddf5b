// The report's `trace` section (docs/report-format.md), built from a trace
// snapshot at report time. Apart from trace.h so that the hot path does not
// see JSON.
#ifndef GPUWATCH_LIBGPUWATCH_TRACE_JSON_H_
#define GPUWATCH_LIBGPUWATCH_TRACE_JSON_H_

#include <cstdint>
#include <string>
#include <vector>

#include "libgpuwatch/trace.h"
#include "libgpuwatch/tracker.h"
#include "nlohmann/json_fwd.hpp"

namespace gpuwatch {

class SiteResolver;

// Stack ids the trace's events refer to, for SiteResolver::Prepare.
std::vector<uint32_t> TraceSiteIds(const TraceSnapshot& trace);

// {"capacity", "recorded", "dropped", "devices", "sites", "names", "events"}.
// `snap` gives the per-device live and peak bytes.
nlohmann::json TraceSectionJson(const TraceSnapshot& trace, const TrackerSnapshot& snap,
                                SiteResolver* sites);

// A report as text, indented like json::dump(2) and ending with a newline,
// except where that would print one line per number or per field: a site's
// `stack` is on one line, and the frame table and then the trace section
// come last, one frame and one event per line. Pretty-printed, those would
// be most of a report's bytes and lines.
std::string DumpReport(nlohmann::json report);

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_TRACE_JSON_H_
