// How reports write numbers for people: bytes, rates and counts. One format
// for the library's summary and every `gpuwatch` command.
#ifndef GPUWATCH_LIBGPUWATCH_REPORT_FORMAT_H_
#define GPUWATCH_LIBGPUWATCH_REPORT_FORMAT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gpuwatch {

// Human-readable byte count: "512 B", "1.5 KiB", "3.0 GiB".
std::string FormatBytes(uint64_t bytes);

// A growth rate in bytes per `unit` ("mark", else per second), negative as 0:
// "1.0 MiB per mark" (kProse, in sentences) or "1.0 MiB/mark" (kCompact, in
// tables). The one format of the summary, `report`, `diff` and `check`.
enum class RateStyle { kProse, kCompact };
std::string FormatRate(double rate, std::string_view unit, RateStyle style);

// "1 copy", "3 copies": `n` and the noun in the number it needs.
std::string CountOf(uint64_t n, const char* one, const char* many);

// What one suppression rule took out of the leaks: allocations and bytes.
struct SuppressionUse {
  std::string rule;  // its text, "leak:AllocateHistory"
  uint64_t count = 0;
  uint64_t bytes = 0;
};

// Adds `count` allocations of `bytes` to `rule`'s row of `uses`.
void AddSuppressionUse(std::vector<SuppressionUse>* uses, std::string_view rule, uint64_t count,
                       uint64_t bytes);

// LeakSanitizer's "Suppressions used" table, the same in the library's
// summary and `gpuwatch report`: a title, a header, then one line per rule
// (most bytes first), each line starting with `prefix`:
//
//   Suppressions used:
//        count        bytes  suppression
//            8      2.0 MiB  leak:AllocateHistory
//
// "" when `uses` is empty.
std::string SuppressionsUsedTable(std::vector<SuppressionUse> uses, const std::string& prefix);

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_REPORT_FORMAT_H_
