// Report building and writing.
//
// Reports are JSON documents (schema in docs/report-format.md) built from a
// TrackerSnapshot at report time; nothing here runs inside a CUDA callback.
#ifndef GPUWATCH_LIBGPUWATCH_REPORT_H_
#define GPUWATCH_LIBGPUWATCH_REPORT_H_

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "libgpuwatch/event.h"
#include "libgpuwatch/kernels.h"
#include "libgpuwatch/lifecycle.h"
#include "libgpuwatch/suppressions.h"
#include "libgpuwatch/symbolizer.h"
#include "libgpuwatch/tracker.h"
#include "libgpuwatch/transfers.h"

namespace gpuwatch {

// 2: sites refer to a frame table (`stack`) instead of listing `frames`.
inline constexpr int kReportSchemaVersion = 2;

class StackTable;
struct TimelineSnapshot;
struct TraceSnapshot;

// A site's built-in category (memory a library keeps on purpose) and the
// suppression rule that matched it.
struct SiteClass {
  std::string_view category;  // "" when none
  const Suppression* suppressed = nullptr;
  // A category the site's frames fall in that is off in this process
  // (PyTorch's allocator in a per-tensor mode); reports then write an
  // explicit empty category, so that tools do not put the site back in it.
  bool category_off = false;
};

// The failed request of an out-of-memory report.
struct OomInfo {
  uint64_t size = 0;
  MemKind kind = MemKind::kDevice;
  std::string api;  // e.g. "cudaMalloc"
  int error = 0;    // cudaError_t or CUresult
  uint32_t stack_id = 0;
  int32_t device = 0;
  uint64_t device_free = 0;  // from cuMemGetInfo; 0 when unknown
  uint64_t device_total = 0;
};

// Turns stack ids into frames for a report: symbolized, with gpuwatch's,
// CUPTI's, the driver's and cudart's frames trimmed from the top, cached per
// id. Report time only; not thread-safe.
class SiteResolver {
 public:
  // `stacks` may be null (no stacks captured): every site then has no frames.
  // `symbolizer`, when given, is used instead of a Symbolizer of the
  // resolver's own, so that what it resolved serves the next report too.
  explicit SiteResolver(const StackTable* stacks, Symbolizer* symbolizer = nullptr);
  ~SiteResolver();
  SiteResolver(const SiteResolver&) = delete;
  SiteResolver& operator=(const SiteResolver&) = delete;

  const std::vector<Frame>& FramesOf(uint32_t stack_id);
  // The site's frames as indices into frame_table(), innermost first: each
  // distinct frame is listed once per report however many stacks hold it.
  const std::vector<uint32_t>& StackOf(uint32_t stack_id);
  // The frames StackOf() has indexed since the last ClearFrameTable(); they
  // point into this resolver's cache.
  const std::vector<const Frame*>& frame_table() const { return frame_table_; }
  void ClearFrameTable();
  // Stacks that read the same after trimming are one site to the user: they
  // may differ in the trimmed frames (the runtime takes another internal path
  // on its first call) or in pcs that map to the same lines (an unrolled
  // loop calls from two addresses). Returns the smallest id resolved so far with the same trimmed
  // stack; resolve ids in increasing order (Prepare) for a stable answer.
  uint32_t Canonical(uint32_t stack_id);
  // Resolves `ids` in increasing order so that Canonical() is deterministic.
  void Prepare(std::vector<uint32_t> ids);
  // "file:line" of the first frame that has a line, else "function (module)",
  // else "<no stack>".
  std::string LocationOf(uint32_t stack_id);
  // The category and the `kind` rule of `suppressions` (may be null) that
  // match the site's frames; computed once per site and kind. Every call on
  // one resolver must pass the same `suppressions`.
  const SiteClass& ClassOf(uint32_t stack_id, const Suppressions* suppressions,
                           SuppressionKind kind);
  // PytorchAllocatesPerTensor() of the process: its allocator's frames are
  // no category. Set before the first ClassOf.
  void set_pytorch_per_tensor(bool on) { pytorch_per_tensor_ = on; }

 private:
  static constexpr uint32_t kUnresolved = UINT32_MAX;

  const StackTable* stacks_;
  bool pytorch_per_tensor_ = false;
  Symbolizer* shared_symbolizer_;
  std::unique_ptr<Symbolizer> own_symbolizer_;
  std::unordered_map<uint32_t, std::vector<Frame>> cache_;
  // id -> canonical id: a flat table over the ids Prepare saw (reports look
  // up one id per live allocation), a map for any other.
  std::vector<uint32_t> canonical_flat_;
  std::unordered_map<uint32_t, uint32_t> canonical_;
  std::unordered_map<uint64_t, SiteClass> classes_;      // (kind, id) -> class
  std::unordered_map<std::string, uint32_t> by_frames_;  // trimmed frames -> id
  // The report's frame table: its frames, an index per distinct frame, and
  // each stack id's indices.
  std::vector<const Frame*> frame_table_;
  std::unordered_map<std::string, uint32_t> frame_index_;
  std::unordered_map<uint32_t, std::vector<uint32_t>> stack_indices_;
};

// Facts about the process and the reason the report is written.
struct ReportContext {
  std::string trigger;  // "exit", "snapshot", ...
  std::string label;    // free text from gpuwatch_snapshot(), may be empty
  long pid = 0;
  std::string host;
  std::string rank;
  std::vector<std::string> command;              // argv of the process
  std::string attach_mode;                       // "preload" or "injection"
  std::string cupti_path;                        // the libcupti that was loaded
  std::string pytorch_allocator;                 // PytorchAllocatorMode() of the process
  const OomInfo* oom = nullptr;                  // set for trigger "oom"
  uint64_t oom_count = 0;                        // out-of-memory failures seen so far
  uint64_t stacks_dropped = 0;                   // stacks not interned: the table was full
  uint64_t python_frames_dropped = 0;            // Python frames not stored: their table was full
  int depth = 0;                                 // GPUWATCH_DEPTH in force
  int tool_frames = 0;                           // ToolFramesSeen() (unwind.h)
  std::string unwinder;                          // UnwindMethodName(ActiveUnwindMethod())
  uint64_t unwind_fallbacks = 0;                 // CfiFallbacks() (unwind.h)
  const TransfersSnapshot* transfers = nullptr;  // null: no transfers section
  const std::vector<KernelStats>* kernels = nullptr;
  bool kernel_timing = false;
  LifecycleFigures lifecycle;
  // Null: no "growth" and "timeline" sections.
  const TimelineSnapshot* timeline = nullptr;
  // Null: no "trace" section (GPUWATCH_TRACE_EVENTS=0).
  const TraceSnapshot* trace = nullptr;
  // GPUWATCH_SUPPRESSIONS; null or empty: nothing is suppressed. Sites are
  // put in built-in categories either way.
  const Suppressions* suppressions = nullptr;
};

// The report as JSON text (pretty-printed, ends with a newline).
std::string BuildReportJson(const TrackerSnapshot& snap, const ReportContext& context,
                            SiteResolver* sites);

// Device bytes live in `snap` that count as leaked: outside `leak:` rules of
// `suppressions` (may be null) and outside the built-in categories. This is
// what GPUWATCH_EXITCODE acts on, and `leaks.device.leaked_bytes` of the
// report built from the same snapshot.
uint64_t LeakedDeviceBytes(const TrackerSnapshot& snap, SiteResolver* sites,
                           const Suppressions* suppressions);

// A few lines for stderr: totals, the largest leaking sites with file:line,
// and where the report went. Each line starts with "gpuwatch: ". `path` is
// where the full report went ("" when it failed).
std::string BuildSummaryText(const TrackerSnapshot& snap, const ReportContext& context,
                             SiteResolver* sites, const std::string& path);

// Writes `contents` to `path` atomically: a temporary file in the same
// directory (O_EXCL, mode 0600) that is fsync'ed and renamed over `path`. On
// failure returns false and sets `error` to a one-line reason; `path` is then
// left as it was.
bool WriteFileAtomically(const std::string& path, const std::string& contents, std::string* error);

// Sets lifecycle.teardown_ns in the report at `path` (read, update, atomic
// rewrite). Used once, from the library destructor, after CUDA's teardown.
bool SetReportTeardown(const std::string& path, uint64_t teardown_ns, std::string* error);

// Human-readable byte count: "512 B", "1.5 KiB", "3.0 GiB".
std::string FormatBytes(uint64_t bytes);

// "1 copy", "3 copies": `n` and the noun in the number it needs.
std::string CountOf(uint64_t n, const char* one, const char* many);

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_REPORT_H_
