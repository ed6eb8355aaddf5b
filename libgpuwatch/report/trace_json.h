// The report's `trace` section (docs/report-format.md), built from a trace
// snapshot at report time (report_trace.cc) as the typed ReportTrace
// (model_trace.h). Apart from trace.h so that the hot path does not see the
// report; trace.cc knows nothing of reports.
#ifndef GPUWATCH_LIBGPUWATCH_REPORT_TRACE_JSON_H_
#define GPUWATCH_LIBGPUWATCH_REPORT_TRACE_JSON_H_

#include <array>
#include <cstdint>
#include <vector>

#include "libgpuwatch/base/device_identity.h"
#include "libgpuwatch/record/phases.h"
#include "libgpuwatch/record/trace.h"
#include "libgpuwatch/record/tracker.h"
#include "libgpuwatch/report/report_model.h"

namespace gpuwatch {

class SiteResolver;

// Stack ids the trace's events refer to, for SiteResolver::Prepare.
std::vector<uint32_t> TraceSiteIds(const TraceSnapshot& trace);

// The section: the ring's counts, the devices, the sites, kernel names and
// phase paths the events name, and the events. `snap` gives the per-device
// live and peak bytes, `phases` the text of phase events' paths (null:
// "(unknown)"), `identity` which GPU each device is (null: unknown).
ReportTrace ReportTraceOf(const TraceSnapshot& trace, const TrackerSnapshot& snap,
                          SiteResolver* sites, const PhasesSnapshot* phases = nullptr,
                          const std::array<DeviceIdentity, kMaxTrackedDevices>* identity = nullptr);

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_REPORT_TRACE_JSON_H_
