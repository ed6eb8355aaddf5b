#include "tools/live/live_growth.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace gpuwatch::tools {

std::optional<double> SustainedGrowthPerMin(const std::vector<std::optional<uint64_t>>& history,
                                            uint64_t interval_ms) {
  std::vector<std::pair<size_t, double>> known;  // (sample index, bytes)
  for (size_t i = 0; i < history.size(); ++i) {
    if (history[i].has_value()) known.emplace_back(i, static_cast<double>(*history[i]));
  }
  if (known.size() < kMinGrowthSamples || interval_ms == 0) return std::nullopt;
  const size_t last = known.size() - 1;
  const size_t ends[] = {0, last / 3, 2 * last / 3, last};
  double slowest = 0;
  int direction = 0;  // +1 rose in every part so far, -1 fell in every part, 0 neither
  for (size_t p = 0; p < 3; ++p) {
    const auto& [from_index, from] = known[ends[p]];
    const auto& [to_index, to] = known[ends[p + 1]];
    const int d = to > from ? 1 : (to < from ? -1 : 0);
    if (d == 0 || (p > 0 && d != direction)) return 0.0;
    direction = d;
    const double minutes =
        static_cast<double>(to_index - from_index) * static_cast<double>(interval_ms) / 60000.0;
    const double rate = (to - from) / minutes;
    slowest = p == 0 ? rate : (std::fabs(rate) < std::fabs(slowest) ? rate : slowest);
  }
  return slowest;
}

}  // namespace gpuwatch::tools
