// Structural checks of a report file beyond its schema and version: the
// limits a hostile or corrupted file must not pass (nesting, string sizes)
// and the types of every field the `gpuwatch` subcommands read.
//
// The subcommands' accessors (U64, Str, ... in report_reader.h) never throw,
// but they read a mistyped field as 0 or "", so a corrupted report would pass
// `gpuwatch check` with made-up figures. ReadReport therefore refuses such a
// report, naming the field. Fields this build does not know are not checked
// (docs/report-format.md: readers ignore them).
#ifndef GPUWATCH_TOOLS_READING_REPORT_VALIDATE_H_
#define GPUWATCH_TOOLS_READING_REPORT_VALIDATE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "libgpuwatch/report/report_model.h"
#include "nlohmann/json.hpp"

namespace gpuwatch::tools {

// Deeper than any report gpuwatch writes (about 7 levels) by a wide margin,
// and shallow enough that the recursive code reading a document (json's
// dump and copy, the checks below) cannot run out of stack.
inline constexpr int kMaxReportDepth = 64;
// No string gpuwatch writes (a demangled name, a path) comes near this.
inline constexpr size_t kMaxReportString = size_t{1} << 20;

// Scans JSON text for arrays and objects nested deeper than kMaxReportDepth,
// without parsing it. Returns "" when fine, else the problem.
std::string CheckNesting(std::string_view text);

// Checks a parsed report (schema, version and required sections already
// validated): its typed sections by reading them (ReadReportModel, into
// `*model` when given), the others field by field. Returns "" when fine,
// else one line naming the field and the problem, e.g.
// `leaks.device.sites[2].bytes is -5, expected a count (not negative)`.
std::string ValidateReport(const nlohmann::json& doc, ReportModel* model = nullptr);

}  // namespace gpuwatch::tools

#endif  // GPUWATCH_TOOLS_READING_REPORT_VALIDATE_H_
