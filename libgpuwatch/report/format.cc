#include "libgpuwatch/report/format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

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

void AddSuppressionUse(std::vector<SuppressionUse>* uses, std::string_view rule, uint64_t count,
                       uint64_t bytes) {
  auto it = std::find_if(uses->begin(), uses->end(),
                         [rule](const SuppressionUse& u) { return u.rule == rule; });
  if (it == uses->end()) it = uses->insert(uses->end(), SuppressionUse{std::string(rule)});
  it->count += count;
  it->bytes += bytes;
}

std::string SuppressionsUsedTable(std::vector<SuppressionUse> uses, const std::string& prefix) {
  if (uses.empty()) return "";
  std::stable_sort(uses.begin(), uses.end(), [](const SuppressionUse& a, const SuppressionUse& b) {
    return a.bytes > b.bytes;
  });
  char row[96];
  std::snprintf(row, sizeof(row), "%10s  %11s  ", "count", "bytes");
  std::string out = prefix + "Suppressions used:\n" + prefix + row + "suppression\n";
  for (const SuppressionUse& u : uses) {
    std::snprintf(row, sizeof(row), "%10llu  %11s  ", static_cast<unsigned long long>(u.count),
                  FormatBytes(u.bytes).c_str());
    out += prefix + row + u.rule + "\n";
  }
  return out;
}

}  // namespace gpuwatch
