// How reports write numbers for people: bytes, rates and counts. One format
// for the library's summary and every `gpuwatch` command.
#ifndef GPUWATCH_LIBGPUWATCH_REPORT_FORMAT_H_
#define GPUWATCH_LIBGPUWATCH_REPORT_FORMAT_H_

#include <cstdint>
#include <string>
#include <string_view>

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

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_REPORT_FORMAT_H_
