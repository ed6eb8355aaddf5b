// The user's allocation helpers (GPUWATCH_ALLOC_FN, `gpuwatch run
// --alloc-fn`), as valgrind massif's --alloc-fn: functions that only wrap
// cudaMalloc and the like, so that the site a report names is the first frame
// outside them, not the helper's own line.
//
// A naming decision made when a stack is read for a report (SiteResolver),
// never in a CUDA callback: stacks are captured whole, and sites whose stacks
// differ only inside the helpers read the same and merge.
#ifndef GPUWATCH_LIBGPUWATCH_ANALYSIS_ALLOC_FUNCTIONS_H_
#define GPUWATCH_LIBGPUWATCH_ANALYSIS_ALLOC_FUNCTIONS_H_

#include <string>
#include <string_view>
#include <vector>

namespace gpuwatch {

// "a::B::f" of "a::B::f(int) const": a demangled function name without its
// parameter list and what follows it; the name itself when it has none.
std::string_view FunctionNameOf(std::string_view function);

class AllocFunctions {
 public:
  AllocFunctions() = default;
  // Each pattern names a function as the report shows it, whole: with its
  // parameters ("Alloc(unsigned long)") or without ("Alloc",
  // "ns::Pool::Get"); `*` matches any run of characters ("*::Alloc*").
  explicit AllocFunctions(const std::vector<std::string>& patterns);

  // True when the demangled `function` is one of the helpers.
  bool Matches(std::string_view function) const;
  bool empty() const { return anchored_.empty(); }

 private:
  std::vector<std::string> anchored_;  // "^PATTERN$" for MatchPattern
};

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_ANALYSIS_ALLOC_FUNCTIONS_H_
