#include "libgpuwatch/report/format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace gpuwatch {

std::string CountOf(uint64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

std::string FormatBytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f %s", value, kUnits[unit]);
  return buf;
}

std::string FormatRate(double rate, std::string_view unit, RateStyle style) {
  const std::string bytes = FormatBytes(static_cast<uint64_t>(std::llround(std::max(0.0, rate))));
  const bool per_mark = unit == "mark";
  if (style == RateStyle::kProse) return bytes + (per_mark ? " per mark" : " per second");
  return bytes + (per_mark ? "/mark" : "/s");
}

}  // namespace gpuwatch
