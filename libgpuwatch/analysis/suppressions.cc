#include "libgpuwatch/analysis/suppressions.h"

#include "libgpuwatch/base/read_file.h"

namespace gpuwatch {

namespace {

// Glob match of the whole `text` against `pattern` where `*` matches any run.
// Iterative with one backtrack point: linear in practice, never recursive.
bool GlobMatch(std::string_view pattern, std::string_view text) {
  size_t p = 0;
  size_t t = 0;
  size_t star = std::string_view::npos;
  size_t star_t = 0;
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      star_t = t;
    } else if (p < pattern.size() && pattern[p] == text[t]) {
      ++p;
      ++t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++star_t;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

enum class Field { kFunction, kModule };

struct CategoryRule {
  const char* category;
  Field field;
  const char* pattern;
  bool pytorch = false;  // PyTorch's caching allocator: off in its per-tensor modes
};

// Module patterns match anywhere in the module's path (a soname stem is enough
// and survives version suffixes); function patterns are anchored where a
// user's own function could otherwise match.
constexpr CategoryRule kCategoryRules[] = {
    {"cuda-runtime", Field::kModule, "libcudart.so"},
    {"cuda-runtime", Field::kModule, "libcuda.so"},
    {"cuda-runtime", Field::kFunction, "^cudart::"},
    {"cuda-runtime", Field::kFunction, "^__cudart"},
    {"cublas", Field::kModule, "libcublas.so"},
    {"cublas", Field::kModule, "libcublasLt.so"},
    {"cudnn", Field::kModule, "libcudnn"},
    {"nccl", Field::kModule, "libnccl.so"},
    {"cuda-libraries", Field::kModule, "libcufft.so"},
    {"cuda-libraries", Field::kModule, "libcurand.so"},
    {"cuda-libraries", Field::kModule, "libcusparse.so"},
    {"cuda-libraries", Field::kModule, "libcusolver.so"},
    {"cuda-libraries", Field::kModule, "libnvjpeg.so"},
    // PyTorch: c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc, ...
    {"caching-allocator", Field::kFunction, "c10::cuda::CUDACachingAllocator::", true},
    {"caching-allocator", Field::kModule, "libc10_cuda.so", true},
    // CuPy's memory pool is Cython: its native frames carry the module only.
    {"caching-allocator", Field::kModule, "cupy/cuda/memory."},
    {"caching-allocator", Field::kModule, "cupy_backends/cuda/"},
    // TensorFlow and XLA (JAX).
    {"caching-allocator", Field::kFunction, "BFCAllocator::"},
    // RAPIDS Memory Manager pools.
    {"caching-allocator", Field::kFunction, "rmm::mr::pool_memory_resource"},
    {"caching-allocator", Field::kFunction, "rmm::mr::arena_memory_resource"},
};

bool FieldMatches(const CategoryRule& rule, const FrameView& frame) {
  return MatchPattern(rule.pattern, rule.field == Field::kFunction ? frame.function : frame.module);
}

}  // namespace

bool MatchPattern(std::string_view pattern, std::string_view text) {
  if (pattern.empty() || text.empty()) return false;
  const bool anchor_start = pattern.front() == '^';
  if (anchor_start) pattern.remove_prefix(1);
  const bool anchor_end = !pattern.empty() && pattern.back() == '$';
  if (anchor_end) pattern.remove_suffix(1);
  // Most patterns (every built-in category) have no wildcard: a substring,
  // prefix, suffix or whole-text test. Reports classify every frame of every
  // site, so this path must not allocate.
  if (pattern.find('*') == std::string_view::npos) {
    if (anchor_start && anchor_end) return text == pattern;
    if (anchor_start) return text.starts_with(pattern);
    if (anchor_end) return text.ends_with(pattern);
    return text.find(pattern) != std::string_view::npos;
  }
  std::string glob;
  glob.reserve(pattern.size() + 2);
  if (!anchor_start) glob += '*';
  glob.append(pattern);
  if (!anchor_end) glob += '*';
  return GlobMatch(glob, text);
}

const char* SuppressionKindName(SuppressionKind kind) {
  return kind == SuppressionKind::kLeak ? "leak" : "growth";
}

std::string Suppression::Text() const {
  return std::string(SuppressionKindName(kind)) + ":" + pattern;
}

bool Suppressions::Parse(std::string_view text, const std::string& origin, std::string* error) {
  int line_number = 0;
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
    ++line_number;
    line = Trim(line);
    if (line.empty() || line.front() == '#') continue;
    const std::string where = origin + ":" + std::to_string(line_number);
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) {
      *error = where + ": expected TYPE:PATTERN (e.g. leak:MyFunction), got \"" +
               std::string(line) + "\"";
      return false;
    }
    const std::string_view type = Trim(line.substr(0, colon));
    const std::string_view pattern = Trim(line.substr(colon + 1));
    Suppression rule;
    if (type == "leak") {
      rule.kind = SuppressionKind::kLeak;
    } else if (type == "growth") {
      rule.kind = SuppressionKind::kGrowth;
    } else {
      *error = where + ": unknown suppression type \"" + std::string(type) +
               "\" (expected leak or growth)";
      return false;
    }
    if (pattern.empty() || pattern == "^" || pattern == "$" || pattern == "^$") {
      *error = where + ": empty pattern";
      return false;
    }
    rule.pattern = pattern;
    rule.origin = where;
    rules_.push_back(std::move(rule));
  }
  return true;
}

bool Suppressions::LoadFile(const std::string& path, std::string* error) {
  std::string text;
  std::string why;
  if (!ReadRegularFile(path, kMaxFileBytes, &text, &why)) {
    *error = "cannot read suppressions file " + path + ": " + why;
    return false;
  }
  return Parse(text, path, error);
}

const Suppression* Suppressions::Match(SuppressionKind kind,
                                       std::span<const FrameView> frames) const {
  for (const Suppression& rule : rules_) {
    if (rule.kind != kind) continue;
    for (const FrameView& f : frames) {
      if (MatchPattern(rule.pattern, f.function) || MatchPattern(rule.pattern, f.file) ||
          MatchPattern(rule.pattern, f.module)) {
        return &rule;
      }
    }
  }
  return nullptr;
}

std::string_view CategoryOf(std::span<const FrameView> frames, bool pytorch_per_tensor) {
  for (const FrameView& f : frames) {
    for (const CategoryRule& rule : kCategoryRules) {
      if (rule.pytorch && pytorch_per_tensor) continue;
      if (FieldMatches(rule, f)) return rule.category;
    }
  }
  return "";
}

}  // namespace gpuwatch
