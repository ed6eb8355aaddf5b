// Report building and writing: the library's side of the report schema
// (report_schema.h). A report is a JSON document (docs/report-format.md)
// built from a TrackerSnapshot at report time; nothing here runs inside a
// CUDA callback. One report: AnalyzeReport once, then BuildReportJson,
// LeakedDeviceBytes and BuildSummaryText from its results, and
// WriteFileAtomically.
//
// The parts, one file each: report_analysis.cc (what is computed once per
// report), report_json.cc (the document and its memory sections),
// report_growth.cc (growth and timeline), report_transfers.cc (transfers),
// report_trace.cc (trace), report_summary.cc (the stderr summary),
// report_file.cc (atomic writing), site_resolver.cc (stack ids as sites).
#ifndef GPUWATCH_LIBGPUWATCH_REPORT_REPORT_H_
#define GPUWATCH_LIBGPUWATCH_REPORT_REPORT_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "libgpuwatch/analysis/growth.h"
#include "libgpuwatch/analysis/site_resolver.h"
#include "libgpuwatch/analysis/suppressions.h"
#include "libgpuwatch/base/device_identity.h"
#include "libgpuwatch/record/cuda_errors.h"
#include "libgpuwatch/record/event.h"
#include "libgpuwatch/record/kernels.h"
#include "libgpuwatch/record/lifecycle.h"
#include "libgpuwatch/record/phases.h"
#include "libgpuwatch/record/regions.h"
#include "libgpuwatch/record/tracker.h"
#include "libgpuwatch/record/transfers.h"
#include "libgpuwatch/report/file.h"
#include "libgpuwatch/report/format.h"
#include "libgpuwatch/report/report_schema.h"

namespace gpuwatch {

class CheckpointText;
struct ReportTorchBlocks;
struct TimelineSnapshot;
struct TraceSnapshot;

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
  // Graph memory the driver keeps for reuse that no graph holds (reserved
  // minus used, cuDeviceGetGraphMemAttribute); 0 when none or unknown.
  uint64_t graph_pool_idle = 0;
  // PyTorch's counters when it raised OutOfMemoryError for this failure
  // (gpuwatch_torch_oom(); report_model.h, OomTorch).
  bool has_torch = false;
  uint64_t torch_allocated = 0;
  uint64_t torch_reserved = 0;
  // PyTorch's blocks as they were handed over at this failure (moment "oom",
  // --torch-blocks), kept with it: the report written again later shows them,
  // not blocks handed over since (at exit, say). Null: the latest blocks.
  std::shared_ptr<const ReportTorchBlocks> torch_blocks;
};

// Facts about the process and the reason the report is written.
struct ReportContext {
  std::string trigger;  // "exit", "snapshot", ...
  std::string label;    // free text from gpuwatch_snapshot(), may be empty
  long pid = 0;
  std::string host;
  std::string rank;
  std::vector<std::string> command;  // argv of the process
  std::string attach_mode;           // "preload" or "injection"
  std::string cupti_path;            // the libcupti that was loaded
  std::string pytorch_allocator;     // PytorchAllocatorMode() of the process
  // Why recording stopped before this report (CUPTI detached under
  // gpuwatch), and when (ns since attach); "" when it did not.
  std::string recording_stopped;
  uint64_t recording_stopped_ns = 0;
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
  // Null or empty: no "cuda_errors" section.
  const CudaErrorsSnapshot* cuda_errors = nullptr;
  bool kernel_timing = false;
  LifecycleFigures lifecycle;
  // Null: no "growth" and "timeline" sections.
  const TimelineSnapshot* timeline = nullptr;
  // Null: no "trace" section (GPUWATCH_TRACE_EVENTS=0).
  const TraceSnapshot* trace = nullptr;
  // Which physical GPU each device ordinal is, as known before the report
  // (an immutable record the background thread published: the report calls
  // neither the driver nor NVML); null: none known. trace.devices[] names it.
  const std::array<DeviceIdentity, kMaxTrackedDevices>* device_identity = nullptr;
  // Null or empty: no "phases" section, and leak sites name no phase.
  const PhasesSnapshot* phases = nullptr;
  // Null or empty: no "regions" section (no pool declared regions).
  const RegionsSnapshot* regions = nullptr;
  // PyTorch's blocks as the Python side last handed them over
  // (gpuwatch_torch_blocks()); null: no "torch_blocks" section.
  std::shared_ptr<const ReportTorchBlocks> torch_blocks;
  // GPUWATCH_SUPPRESSIONS; null or empty: nothing is suppressed. Sites are
  // put in built-in categories either way.
  const Suppressions* suppressions = nullptr;
  // A checkpoint's text kept from the process's last checkpoint
  // (checkpoint_text.h): the report's frame table is the resolver's kept one
  // (append-only: frames keep their indices and may include frames no
  // section names), and the text of what did not change is reused. Null
  // for every other report: built from scratch, listing only the frames
  // its sections name.
  CheckpointText* kept = nullptr;
};

// A site (canonical id) that allocated and freed memory of a churn kind
// (IsChurnKind) in a loop: at least kAllocChurnMinCycles frees that left it
// with none of that kind live. Its figures: the SiteTotals of its stack ids
// summed (frees, churn_cycles, alloc_bytes and call_ns are read).
struct ChurnSite {
  uint32_t stack_id = 0;
  SiteTotals totals;
};
inline constexpr uint64_t kAllocChurnMinCycles = 10;
inline constexpr size_t kMaxChurnFindings = 10;
// The churning sites of `snap`, merged by canonical id, most time in their
// calls first (then most cycles), at most kMaxChurnFindings.
std::vector<ChurnSite> ChurnSites(const TrackerSnapshot& snap, SiteResolver* sites);

// Live allocations of one site (canonical id), device kinds, host kinds and
// imported kinds apart.
struct LeakGroup {
  uint32_t stack_id = 0;
  uint64_t bytes = 0;
  uint64_t count = 0;
  std::array<uint64_t, kNumMemKinds> kind_bytes{};
  uint64_t oldest_ns = UINT64_MAX;  // stays so when unknown (a capture by site)
  uint32_t phase = 0;               // the phase (path id) that allocated most of its bytes; 0: none
};

// What the report's sections and its summary share, computed once per
// report: the live allocations grouped by site, the transfer sites merged
// and their findings, the growth suspects.
struct ReportAnalysis {
  std::vector<LeakGroup> device_live;  // largest first
  std::vector<LeakGroup> host_live;    // largest first
  // Another process's memory this one still has open (CUDA IPC), largest
  // first: shown apart, never counted as leaked.
  std::vector<LeakGroup> imported_live;
  // Transfer sites merged as the report shows them (Canonical), busiest
  // first, and what FindTransferIssues finds in them; empty without
  // context.transfers.
  std::vector<std::pair<uint32_t, SiteTransfers>> transfer_sites;
  std::vector<TransferFinding> transfer_findings;
  // From the marks when the program made any, else from the periodic
  // samples (growth.h has the rules); empty without context.timeline.
  std::vector<GrowthSuspect> growth_suspects;
  // Sites that allocate and free again and again (ChurnSites), most time
  // in those calls first.
  std::vector<ChurnSite> churn;
};

// Resolves every site the report will name (SiteResolver::Prepare, so that
// Canonical is deterministic) and computes the analysis.
ReportAnalysis AnalyzeReport(const TrackerSnapshot& snap, const ReportContext& context,
                             SiteResolver* sites);

// The report as JSON text (pretty-printed, ends with a newline). `analysis`
// from AnalyzeReport of the same snapshot, context and resolver. `flush`:
// the frame table and the trace streamed as they are made (DumpReport's
// TextFlush); the rest returned.
std::string BuildReportJson(const TrackerSnapshot& snap, const ReportContext& context,
                            SiteResolver* sites, const ReportAnalysis& analysis,
                            const TextFlush* flush = nullptr);
// The same, analyzing first (one call, one report).
std::string BuildReportJson(const TrackerSnapshot& snap, const ReportContext& context,
                            SiteResolver* sites);

// Device bytes live that count as leaked: outside `leak:` rules of
// `suppressions` (may be null) and outside the built-in categories. This is
// what GPUWATCH_EXITCODE acts on, and `leaks.device.leaked_bytes` of the
// report built from the same analysis.
uint64_t LeakedDeviceBytes(const ReportAnalysis& analysis, SiteResolver* sites,
                           const Suppressions* suppressions);

// A few lines for stderr: totals, the largest leaking sites with file:line,
// and where the report went. Each line starts with "gpuwatch: ". `path` is
// where the full report went ("" when it failed).
std::string BuildSummaryText(const TrackerSnapshot& snap, const ReportContext& context,
                             const ReportAnalysis& analysis, SiteResolver* sites,
                             const std::string& path);

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_REPORT_REPORT_H_
