#include "libgpuwatch/analysis/alloc_functions.h"

#include "libgpuwatch/analysis/suppressions.h"

namespace gpuwatch {

std::string_view FunctionNameOf(std::string_view function) {
  // Back over the parameter list: from its last ')' to the matching '('.
  const size_t close = function.rfind(')');
  if (close == std::string_view::npos) return function;
  int depth = 0;
  for (size_t i = close + 1; i-- > 0;) {
    if (function[i] == ')') ++depth;
    if (function[i] == '(' && --depth == 0) return function.substr(0, i);
  }
  return function;
}

AllocFunctions::AllocFunctions(const std::vector<std::string>& patterns) {
  for (const std::string& p : patterns) {
    if (!p.empty()) anchored_.push_back("^" + p + "$");
  }
}

bool AllocFunctions::Matches(std::string_view function) const {
  if (function.empty()) return false;
  const std::string_view name = FunctionNameOf(function);
  for (const std::string& p : anchored_) {
    if (MatchPattern(p, function) || (name != function && MatchPattern(p, name))) return true;
  }
  return false;
}

}  // namespace gpuwatch
