// Structural checks of a report file beyond its schema and version: the
// limits a hostile or corrupted file must not pass (nesting, string sizes)
// and the types of every field the `gpuwatch` subcommands read.
//
// The subcommands' accessors (U64, Str, ... in report_reader.h) never throw,
// but they read a mistyped field as 0 or "", so a corrupted report would pass
// `gpuwatch check` with made-up figures. ReadReport therefore refuses such a
// report, naming the field. Fields this build does not know are not checked
// (docs/report-format.md: readers ignore them).
#ifndef GPUWATCH_TOOLS_REPORT_VALIDATE_H_
#define GPUWATCH_TOOLS_REPORT_VALIDATE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "nlohmann/json.hpp"

namespace gpuwatch::tools {

// Deeper than any report gpuwatch writes (about 7 levels) by a wide margin,
// and shallow enough that the recursive code reading a document (json's
// dump and copy, the checks below) cannot run out of stack.
inline constexpr int kMaxReportDepth = 64;
// No string gpuwatch writes (a demangled name, a path) comes near this.
inline constexpr size_t kMaxReportString = size_t{1} << 20;
// Byte counts, counts and nanoseconds: 2^53, exact in a double, 8 PiB or 104
// days; sums of many of them cannot overflow 64 bits.
inline constexpr uint64_t kMaxReportCount = uint64_t{1} << 53;

// Scans JSON text for arrays and objects nested deeper than kMaxReportDepth,
// without parsing it. Returns "" when fine, else the problem.
std::string CheckNesting(std::string_view text);

// Checks a parsed report (schema, version and required sections already
// validated). Returns "" when fine, else one line naming the field and the
// problem, e.g. `leaks.device.sites[2].bytes is -5, expected a byte count`.
std::string ValidateReport(const nlohmann::json& doc);

}  // namespace gpuwatch::tools

#endif  // GPUWATCH_TOOLS_REPORT_VALIDATE_H_
