#include "libgpuwatch/report/site_groups.h"

#include <algorithm>
#include <unordered_map>

#include "libgpuwatch/report/format.h"

namespace gpuwatch {

std::vector<SiteGroup> GroupByLocation(const std::vector<std::string>& keys,
                                       const std::vector<uint64_t>& bytes) {
  std::vector<SiteGroup> groups;
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < keys.size(); ++i) {
    const auto [at, added] = index.try_emplace(keys[i], groups.size());
    if (added) groups.emplace_back();
    groups[at->second].members.push_back(i);
    groups[at->second].bytes += i < bytes.size() ? bytes[i] : 0;
  }
  std::stable_sort(groups.begin(), groups.end(),
                   [](const SiteGroup& a, const SiteGroup& b) { return a.bytes > b.bytes; });
  return groups;
}

size_t FirstDifference(const std::vector<size_t>& members,
                       const std::function<std::string(size_t row, size_t index)>& frame) {
  if (members.size() < 2) return 0;
  // Stacks are finite: two that are the same to their ends are one site, so
  // the walk ends where the first runs out (its "" against a frame) at last.
  for (size_t i = 0; i < 4096; ++i) {
    const std::string first = frame(members[0], i);
    for (size_t m = 1; m < members.size(); ++m) {
      if (frame(members[m], i) != first) return i;
    }
    if (first.empty()) return i;
  }
  return 0;
}

std::string MoreCallPaths(size_t n) {
  return n == 0 ? "" : "... and " + CountOf(n, "more call path", "more call paths");
}

}  // namespace gpuwatch
