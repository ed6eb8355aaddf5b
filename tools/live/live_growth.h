// Growth as `gpuwatch top` shows and sorts it: a sustained rise, not the
// difference between the newest and the oldest sample (docs/live.md,
// "Growth"). A one-time allocation (a model's 64 MiB loaded at start) is a
// step: it rose once and holds, and is not growing; a leak rises all along.
#ifndef GPUWATCH_TOOLS_LIVE_LIVE_GROWTH_H_
#define GPUWATCH_TOOLS_LIVE_LIVE_GROWTH_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace gpuwatch::tools {

// Known samples a growth needs: 6, five intervals (5 s of history).
inline constexpr size_t kMinGrowthSamples = 6;

// Bytes per minute a quantity grows by, from its samples `history`, oldest
// first, one every `interval_ms` (null: not known then). The known samples
// are cut into three parts of equal length that share their ends. The
// quantity grows when it ended higher than it began in each of the three
// parts; the growth is then the slowest part's rate, so that a step inside a
// steady rise does not inflate it. It shrinks (a negative growth) when it
// ended lower in each part, at the slowest part's rate. Otherwise its growth
// is 0: a step rises in one part only, and a sawtooth (allocate, free) ends
// where it began. Unknown (nullopt) with fewer than kMinGrowthSamples known
// samples, or an interval of 0.
std::optional<double> SustainedGrowthPerMin(const std::vector<std::optional<uint64_t>>& history,
                                            uint64_t interval_ms);

}  // namespace gpuwatch::tools

#endif  // GPUWATCH_TOOLS_LIVE_LIVE_GROWTH_H_
