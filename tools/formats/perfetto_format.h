// `gpuwatch report --format perfetto`: a report as Chrome trace-event JSON,
// which ui.perfetto.dev and chrome://tracing open.
//
// From the report's `trace` section (docs/report-format.md):
//   - a counter track per device, "device N memory" (bytes live after each
//     allocation and free);
//   - copies as complete ("X") slices on a "copies" track per device and
//     stream, named like "H2D 4.0 MiB pageable", with bytes, location and
//     GB/s; kernels on a "kernels" track per device and stream;
//   - marks, the highest peak and OOMs as instant events on an "events" track;
//   - process and thread names ("M" events); timestamps in microseconds since
//     gpuwatch attached.
// A report without a trace section (an older report, or one written with
// GPUWATCH_TRACE_EVENTS=0) gives a counter of all devices together from the
// timeline samples, marks from the timeline, the peak and OOM from their
// sections, and an instant and `otherData.source` that say so.
#ifndef GPUWATCH_TOOLS_FORMATS_PERFETTO_FORMAT_H_
#define GPUWATCH_TOOLS_FORMATS_PERFETTO_FORMAT_H_

#include <cstdio>

#include "tools/reading/report_reader.h"

namespace gpuwatch::tools {

// Writes the trace-event JSON document ({"traceEvents": [...], ...}) of a
// report to `out`, a megabyte at a time: its trace's events (ReadReport
// checked them and what they refer to) or, without a trace, the timeline's
// samples.
void WritePerfettoTrace(const Report& report, FILE* out);

}  // namespace gpuwatch::tools

#endif  // GPUWATCH_TOOLS_FORMATS_PERFETTO_FORMAT_H_
