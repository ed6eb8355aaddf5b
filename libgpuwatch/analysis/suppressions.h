// Suppressions and built-in categories of allocation sites.
//
// A suppressions file is in LeakSanitizer's spirit: one rule per line,
// `TYPE:PATTERN`, where TYPE is `leak` (the site's live memory is not counted
// as leaked) or `growth` (the site is not counted as a growth suspect), and
// PATTERN is matched against the function, the source file and the module of
// every frame of the site's stack. Blank lines and lines starting with `#`
// are ignored. PATTERN matching (MatchPattern): `*` matches any run of
// characters; without anchors the pattern may match anywhere in the text
// (`leak:AllocateHistory` matches `(anonymous namespace)::AllocateHistory()`);
// a leading `^` anchors it at the start and a trailing `$` at the end.
//
// Categories name memory that libraries keep on purpose: CUDA runtime
// internals, cuBLAS and cuDNN workspaces and handles, NCCL buffers, other
// CUDA math libraries, and caching allocators (PyTorch's, CuPy's, the BFC
// allocator of TensorFlow and XLA, RMM's pools). A site in a category is
// reported apart from what leaked.
//
// The same code serves the in-process library (GPUWATCH_SUPPRESSIONS, at
// report time) and the `gpuwatch check` command, which sees the frames of a
// report file; both describe a frame with a FrameView. Nothing here runs in a
// CUDA callback. Thread-safety: a Suppressions object is immutable once
// loaded, so concurrent Match() calls are safe.
#ifndef GPUWATCH_LIBGPUWATCH_ANALYSIS_SUPPRESSIONS_H_
#define GPUWATCH_LIBGPUWATCH_ANALYSIS_SUPPRESSIONS_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gpuwatch {

// What a rule or a category sees of a frame. Empty fields never match.
struct FrameView {
  std::string_view function;  // demangled
  std::string_view file;      // source path as recorded in DWARF
  std::string_view module;    // path of the executable or shared object
};

// True when `pattern` matches `text` (see the file comment). An empty
// pattern matches nothing.
bool MatchPattern(std::string_view pattern, std::string_view text);

enum class SuppressionKind { kLeak, kGrowth };

// "leak" or "growth".
const char* SuppressionKindName(SuppressionKind kind);

struct Suppression {
  SuppressionKind kind = SuppressionKind::kLeak;
  std::string pattern;
  std::string origin;  // "FILE:LINE" the rule came from

  // The rule as written: "leak:PATTERN".
  std::string Text() const;
};

class Suppressions {
 public:
  // Adds the rules of `text`; `origin` names it in messages (a path). On a
  // malformed line, returns false with `error` set to one line naming the
  // origin, the line number and the problem; the rules of earlier lines are
  // kept.
  bool Parse(std::string_view text, const std::string& origin, std::string* error);

  // Parse() of a file's contents. A file that cannot be read, is not a
  // regular file (a directory, a FIFO, /dev/zero) or is larger than
  // kMaxFileBytes is an error.
  static constexpr uint64_t kMaxFileBytes = uint64_t{1} << 20;
  bool LoadFile(const std::string& path, std::string* error);

  // The first rule of `kind` that matches a field of any frame, or nullptr.
  const Suppression* Match(SuppressionKind kind, std::span<const FrameView> frames) const;

  bool empty() const { return rules_.empty(); }
  size_t size() const { return rules_.size(); }

 private:
  std::vector<Suppression> rules_;
};

// The built-in category of a stack: the category of the innermost frame that
// belongs to one, or "" when none does. Names: "cuda-runtime", "cublas",
// "cudnn", "nccl", "cuda-libraries", "caching-allocator".
// `pytorch_per_tensor`: PyTorch allocates every tensor itself
// (PytorchAllocatesPerTensor), so its allocator's frames are not a category:
// what they hold is what tensors hold.
std::string_view CategoryOf(std::span<const FrameView> frames, bool pytorch_per_tensor = false);

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_ANALYSIS_SUPPRESSIONS_H_
