// Sites that read the same where they allocate (one helper's line reached
// from many call paths) grouped under that location, as heaptrack's
// bottom-up view does, with what tells them apart: the first frame, from the
// innermost, where their stacks differ. The one rule of the library's
// summary and `gpuwatch report`'s text.
#ifndef GPUWATCH_LIBGPUWATCH_REPORT_SITE_GROUPS_H_
#define GPUWATCH_LIBGPUWATCH_REPORT_SITE_GROUPS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace gpuwatch {

// Call paths listed under a location before a "... and N more" row.
inline constexpr size_t kCallPathsShown = 3;

struct SiteGroup {
  std::vector<size_t> members;  // indices of the rows, in the rows' order
  uint64_t bytes = 0;           // the members' bytes summed
  // Members' frames from the innermost: the first index where they are not
  // all the same (its frames name each member's call path). 0 for a group
  // of one.
  size_t split = 0;
};

// Rows grouped by `keys[i]` (what row i reads as: its location and
// function), most `bytes` (row i's: bytes[i]) first, then in the order of
// their first row.
std::vector<SiteGroup> GroupByLocation(const std::vector<std::string>& keys,
                                       const std::vector<uint64_t>& bytes);

// The first frame index at which the stacks of `group`'s members differ.
// `frame(row, i)`: the text of row's frame i (innermost 0), "" past its end.
size_t FirstDifference(const std::vector<size_t>& members,
                       const std::function<std::string(size_t row, size_t index)>& frame);

// "... and 4 more call paths" (`n` more), or "" when n is 0.
std::string MoreCallPaths(size_t n);

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_REPORT_SITE_GROUPS_H_
