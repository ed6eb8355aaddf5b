// `gpuwatch report --format html`: a report as one self-contained HTML page
// (tools/html/report.html, embedded at build time) that opens from disk with
// no network: device memory over time stacked by site with the marks, the
// peak and any OOM; the leak, growth and peak tables with each site's stack;
// icicle graphs of the bytes live at exit and at the peak; the transfers.
#ifndef GPUWATCH_TOOLS_FORMATS_HTML_FORMAT_H_
#define GPUWATCH_TOOLS_FORMATS_HTML_FORMAT_H_

#include <string>

#include "tools/reading/report_reader.h"

namespace gpuwatch::tools {

// The page for a report (the phase events of its trace, if kept, are drawn
// under the chart).
std::string HtmlReport(const Report& report);

// `doc` as JSON that is safe inside a <script> element: "<", ">" and "&" are
// written as \u003c, \u003e and \u0026, so no string in the report (a
// function name, a label) can close the element or open a comment.
std::string ScriptSafeJson(const json& doc);

}  // namespace gpuwatch::tools

#endif  // GPUWATCH_TOOLS_FORMATS_HTML_FORMAT_H_
