// The report as types: what its header, totals, leaks, peak, allocation
// sites, growth suspects, OOM request, phases and pool regions
// (model_phases.h), transfers, kernels, timeline and lifecycle
// (model_activity.h), PyTorch's blocks (model_torch.h) and the event trace
// (model_trace.h) hold, with the one
// JSON writer and the one JSON reader of every section. The library's writer fills a
// ReportModel from its snapshots, `gpuwatch merge` reads many and writes
// one, and the tools' reader and validator read every report through it, so
// that a field's name, type and meaning are stated here once.
//
// Each site list's figures are listed once, in a field table, with the rule
// that merges them across processes (a sum, the largest or the smallest),
// so that reading, writing and merging cannot disagree. The tables are
// constant arrays: an exit report may be written after static destructors
// have run.
#ifndef GPUWATCH_LIBGPUWATCH_REPORT_REPORT_MODEL_H_
#define GPUWATCH_LIBGPUWATCH_REPORT_REPORT_MODEL_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "libgpuwatch/report/report_schema.h"
#include "nlohmann/json.hpp"

namespace gpuwatch {

// Sites a section lists at most; the rest are summed in its "omitted_*".
inline constexpr size_t kMaxSitesPerSection = 1000;

struct Frame;
class CheckpointText;

// A count field's rule in `gpuwatch merge`.
enum class MergeRule { kSum, kMax, kMin };

// A byte count, a count or nanoseconds of T, by its key.
template <typename T>
struct CountField {
  const char* key;
  uint64_t T::*member;
  MergeRule merge = MergeRule::kSum;
};

using CountMap = std::map<std::string, uint64_t, std::less<>>;

// Each struct's counts are one X-list, X(member, merge rule), whose member
// name is its JSON key: GPUWATCH_COUNTS declares them (uint64_t, 0) and the
// struct's Counts(), which lists them (report_model.cc) for reading,
// writing and merging.
#define GPUWATCH_DECLARE_COUNT(member, rule) uint64_t member = 0;
// NOLINTBEGIN(bugprone-macro-parentheses): declarations, not expressions
#define GPUWATCH_COUNTS(Type, LIST) \
  LIST(GPUWATCH_DECLARE_COUNT)      \
  static std::span<const CountField<Type>> Counts();
// NOLINTEND(bugprone-macro-parentheses)
// The definition of Type::Counts() (a .cc file's): the X-list, in order.
#define GPUWATCH_COUNT_FIELD(member, rule) {#member, &Self::member, MergeRule::rule},
#define GPUWATCH_COUNTS_OF(Type, LIST)                                          \
  std::span<const CountField<Type>> Type::Counts() {                            \
    using Self = Type;                                                          \
    static constexpr CountField<Type> kFields[] = {LIST(GPUWATCH_COUNT_FIELD)}; \
    return kFields;                                                             \
  }

// Writes the counts `fields` of `from` into `out` (an object).
template <typename T>
void PutCounts(const T& from, std::span<const CountField<T>> fields, nlohmann::json* out) {
  for (const CountField<T>& f : fields) (*out)[f.key] = from.*f.member;
}

// One frame of a stack, innermost first (docs/report-format.md).
struct ReportFrame {
  std::string function;
  std::string file;
  uint64_t line = 0;
  std::string module;
  bool inlined = false;
};

// What every entry of a site list has.
struct ReportSite {
  uint64_t site = 0;  // the stack id; merge renumbers
  std::string location;
  // Its frames: as indices into the report's frame table (`stack`, how
  // reports are written), or the frames themselves (`frames`, version 1 and
  // every report after InlineFrameTable). ToJson writes `frames` when there
  // are frames, else `stack`.
  std::vector<uint32_t> stack;
  std::vector<ReportFrame> frames;
  std::optional<std::string> category;    // present: the report says (may be "": none)
  std::optional<std::string> suppressed;  // the rule's text
  uint64_t processes = 0;                 // merged reports: processes with the site; 0: absent
};

// leaks.*.sites[]: live memory of one site.
// clang-format off
#define GPUWATCH_LEAK_SITE_COUNTS(X) X(bytes, kSum) X(count, kSum) X(oldest_ns, kMin)
// clang-format on
// oldest_ns when the report does not know it (an oom or context_destroy
// report's sites): not written, and absent when read.
inline constexpr uint64_t kUnknownOldest = UINT64_MAX;
struct LeakSite : ReportSite {
  GPUWATCH_COUNTS(LeakSite, GPUWATCH_LEAK_SITE_COUNTS)
  CountMap kinds;     // live bytes per memory kind
  std::string phase;  // the phase that allocated most of its bytes; "": none (absent)
};

// peak.sites[]: device bytes of one site when the peak was reached.
// clang-format off
#define GPUWATCH_PEAK_SITE_COUNTS(X) X(bytes, kSum)
// clang-format on
struct PeakSite : ReportSite {
  GPUWATCH_COUNTS(PeakSite, GPUWATCH_PEAK_SITE_COUNTS)
};

// sites[]: everything one site allocated.
// host_*: how much of allocs and alloc_bytes was pinned or registered host
// memory; largest: the largest single allocation.
// clang-format off
#define GPUWATCH_ALLOC_SITE_COUNTS(X)                                        \
  X(allocs, kSum) X(alloc_bytes, kSum) X(largest, kMax)                      \
  X(live_device_bytes, kSum) X(live_device_count, kSum) X(host_allocs, kSum) \
  X(host_alloc_bytes, kSum) X(frees, kSum) X(churn_cycles, kSum) X(call_ns, kSum)
// clang-format on
// sizes: its allocations by size, in the tracker's buckets (SizeBucket: up
// to 1 KiB, up to 4 KiB, ... up to 1 GiB, over 1 GiB); empty when the report
// predates them. Merge adds them element by element.
inline constexpr size_t kSizeBucketCount = 12;
struct AllocSite : ReportSite {
  GPUWATCH_COUNTS(AllocSite, GPUWATCH_ALLOC_SITE_COUNTS)
  std::vector<uint64_t> sizes;
};

// growth.suspects[]: a site whose live bytes keep growing.
// clang-format off
#define GPUWATCH_GROWTH_SITE_COUNTS(X)                           \
  X(first_bytes, kSum) X(last_bytes, kSum) X(growth_bytes, kSum) \
  X(samples, kMax)
// clang-format on
struct GrowthSite : ReportSite {
  GPUWATCH_COUNTS(GrowthSite, GPUWATCH_GROWTH_SITE_COUNTS)
  double rate = 0;   // bytes per `unit`
  std::string unit;  // "mark" or "s"
  double from = 0;   // the window, in marks or seconds
  double to = 0;
  std::vector<uint64_t> series;  // the site's bytes at every sample; merge drops it
  std::string phase;  // the phase that allocated most of its live bytes; "": none (absent)
};

// oom: the request that failed.
// device_*: cuMemGetInfo's at the failure, 0 when unknown.
// graph_pool_idle_bytes: graph memory the driver kept for reuse and no graph
// held (cudaDeviceGraphMemTrim returns it to the device), 0 when none.
// clang-format off
#define GPUWATCH_OOM_SITE_COUNTS(X)                                    \
  X(size, kSum) X(device_free_bytes, kSum) X(device_total_bytes, kSum) \
  X(graph_pool_idle_bytes, kSum)
// clang-format on
// oom.torch: PyTorch's own counters when it raised OutOfMemoryError for this
// failure (its out-of-memory observer, python/gpuwatch/torch_blocks.py):
// allocated_bytes (its tensors' blocks) and reserved_bytes (its segments),
// read after PyTorch emptied its cache and retried, so reserved_bytes may be
// less than the device memory live at the failure.
// clang-format off
#define GPUWATCH_OOM_TORCH_COUNTS(X) X(allocated_bytes, kSum) X(reserved_bytes, kSum)
// clang-format on
struct OomTorch {
  GPUWATCH_COUNTS(OomTorch, GPUWATCH_OOM_TORCH_COUNTS)
};

struct OomSite : ReportSite {
  GPUWATCH_COUNTS(OomSite, GPUWATCH_OOM_SITE_COUNTS)
  std::optional<OomTorch> torch;  // absent: PyTorch did not say (not PyTorch, no observer)
  std::string kind;               // the memory kind asked for
  std::string api;                // CUPTI's function name
  int64_t error = 0;
  int64_t device = 0;
};

// leaks.device, leaks.host or leaks.ipc_imported.
// omitted_*: the sites beyond the list's limit, summed.
// clang-format off
#define GPUWATCH_LEAK_LIST_COUNTS(X)                   \
  X(bytes, kSum) X(count, kSum) X(omitted_sites, kSum) \
  X(omitted_bytes, kSum)
// clang-format on
struct LeakList {
  GPUWATCH_COUNTS(LeakList, GPUWATCH_LEAK_LIST_COUNTS)
  LeakSplitFigures split;  // as the report states it
  std::vector<LeakSite> sites;
};

// totals.kinds.K.
// clang-format off
#define GPUWATCH_KIND_ROW_COUNTS(X)                                 \
  X(current_bytes, kSum) X(current_count, kSum) X(peak_bytes, kSum) \
  X(allocs, kSum) X(alloc_bytes, kSum) X(frees, kSum)
// clang-format on
struct KindRow {
  GPUWATCH_COUNTS(KindRow, GPUWATCH_KIND_ROW_COUNTS)
};

// totals.copies.D.
// clang-format off
#define GPUWATCH_COPY_ROW_COUNTS(X) X(count, kSum) X(bytes, kSum)
// clang-format on
struct CopyRow {
  GPUWATCH_COUNTS(CopyRow, GPUWATCH_COPY_ROW_COUNTS)
};

// docs/report-format.md has each one's meaning.
// clang-format off
#define GPUWATCH_TOTALS_COUNTS(X)                                                     \
  X(device_current_bytes, kSum) X(device_peak_bytes, kSum) X(device_live_count, kSum) \
  X(host_current_bytes, kSum) X(host_live_count, kSum) X(unknown_frees, kSum)         \
  X(kernel_launches, kSum) X(dropped_allocs, kSum) X(stacks_dropped, kSum)            \
  X(python_frames_dropped, kSum) X(oom_count, kSum)
// clang-format on
struct ReportTotals {
  GPUWATCH_COUNTS(ReportTotals, GPUWATCH_TOTALS_COUNTS)
  std::map<std::string, KindRow, std::less<>> kinds;
  std::map<std::string, CopyRow, std::less<>> copies;
};

// clang-format off
#define GPUWATCH_PEAK_COUNTS(X)                                               \
  X(device_bytes, kSum) X(sites_at_device_bytes, kSum) X(sites_time_ns, kSum)
// clang-format on
struct ReportPeak {
  GPUWATCH_COUNTS(ReportPeak, GPUWATCH_PEAK_COUNTS)
  // Bytes of each memory kind live at the device peak (when its sites were
  // captured: sites_at_device_bytes, which the device kinds add up to); each
  // kind's own high-water mark is totals.kinds.KIND.peak_bytes.
  CountMap kinds;
  std::vector<PeakSite> sites;
};

struct ReportGrowth {
  std::string basis;  // "mark", "s", "none"; merge: "mixed" too
  uint64_t samples = 0;
  std::vector<GrowthSite> suspects;
};

struct ReportProcess {
  uint64_t pid = 0;
  std::string host;
  std::string rank;
  std::vector<std::string> command;
  uint64_t elapsed_ns = 0;
  std::string pytorch_allocator;  // "": absent
};

// processes[] of a merged report: one row per report merged.
// clang-format off
#define GPUWATCH_MERGED_PROCESS_COUNTS(X)                             \
  X(pid, kSum) X(elapsed_ns, kSum) X(device_peak_bytes, kSum)         \
  X(device_current_bytes, kSum) X(leaked_bytes, kSum) X(allocs, kSum)
// clang-format on
struct MergedProcess {
  GPUWATCH_COUNTS(MergedProcess, GPUWATCH_MERGED_PROCESS_COUNTS)
  std::string file;
  std::string host;
  std::string rank;
  std::vector<std::string> command;
  std::string trigger;
};

// How the stacks were captured; absent from merged reports.
struct ReportUnwind {
  uint64_t tool_frames = 0;
  std::string unwinder;
  uint64_t unwind_fallbacks = 0;
};

}  // namespace gpuwatch

// The sections of model_*.h, which use the types above.
#include "libgpuwatch/report/model_activity.h"  // IWYU pragma: export
#include "libgpuwatch/report/model_errors.h"    // IWYU pragma: export
#include "libgpuwatch/report/model_phases.h"    // IWYU pragma: export
#include "libgpuwatch/report/model_torch.h"     // IWYU pragma: export
#include "libgpuwatch/report/model_trace.h"     // IWYU pragma: export

namespace gpuwatch {

struct ReportModel {
  std::string trigger;
  std::string label;
  std::string gpuwatch_version;
  std::string attach;  // "preload", "injection", "merge"
  std::string cupti;
  // Why gpuwatch stopped recording before this report (CUPTI detached under
  // it) and when (ns since attach): what followed was not recorded, so no
  // gate may pass it. "" when it recorded to the end.
  std::string recording_stopped;
  uint64_t recording_stopped_ns = 0;
  ReportProcess process;
  ReportTotals totals;
  int64_t stack_depth = 0;
  std::optional<ReportUnwind> unwind;
  LeakList leaks_device;
  LeakList leaks_host;
  // Another process's memory opened through CUDA IPC and not closed: shown,
  // never this process's leak (no gate counts it).
  LeakList leaks_ipc_imported;
  ReportPeak peak;
  std::vector<AllocSite> sites;
  std::optional<ReportGrowth> growth;
  std::optional<OomSite> oom;
  // CUDA errors; absent when the run had none.
  std::optional<ReportCudaErrors> cuda_errors;
  std::optional<ReportPhases> phases;
  std::optional<ReportRegions> regions;
  // PyTorch's allocator view (gpuwatch run --torch-blocks); merged: sums only.
  std::optional<ReportTorchBlocks> torch_blocks;
  uint64_t merged_from = 0;  // merged reports; 0: absent
  std::vector<MergedProcess> processes;
  std::optional<ReportTransfers> transfers;
  std::optional<ReportKernels> kernels;
  std::optional<ReportTimeline> timeline;
  std::optional<ReportLifecycle> lifecycle;
  // The frames sites' `stack` indices name (ToJson writes it; FromJson
  // reads it as given).
  std::vector<ReportFrame> frame_table;
  std::optional<ReportTrace> trace;  // GPUWATCH_TRACE_EVENTS=0, merged reports: none

  // Calls `fn` on every site the model holds.
  void ForEachSite(const std::function<void(ReportSite&)>& fn);

  // Turns every site's `frames` into `stack` indices into a new frame table,
  // each distinct frame once (merge: sites from many reports).
  void BuildFrameTable();

  // The inverse: every site's `stack` becomes its `frames`, and the frame
  // table is emptied (readers: one shape for versions 1 and 2).
  void InlineFrameTable();

  // Writes the model's sections into `doc` (an object), with the schema's
  // name and version; other members of `doc` are kept. Without
  // `trace_events`, the trace has no "events" (Dump writes them); without
  // `trace_sites`, no "sites" (Dump writes a checkpoint's kept rows).
  void ToJson(nlohmann::json* doc, bool trace_events = true, bool trace_sites = true) const;

  // The report's text (DumpReport) of `doc` with the model's sections; the
  // trace's events are written from their structs, never as a document
  // (model_trace.cc). `flush`: DumpReport's (the text streamed; the rest
  // returned). `kept`: a checkpoint's kept text (checkpoint_text.h), for
  // the frame table (whose rows it holds, the model's frame_table left
  // empty), the trace's sites and the site rows it took (TakeRows).
  std::string Dump(nlohmann::json doc, const TextFlush* flush = nullptr,
                   CheckpointText* kept = nullptr) const;
};

// A leaks section as the report writes it (ReportModel::ToJson's).
nlohmann::json LeakListJson(const LeakList& list);

// gpuwatch_live_since()'s answer: what was allocated after a point and is
// still live, device and host apart, and the device peak since the point.
nlohmann::json LiveSinceJson(const LeakList& device, const LeakList& host,
                             uint64_t window_peak_bytes);

// What every site entry has (ReportSite), as ToJson writes it.
nlohmann::json SiteJson(const ReportSite& site);

// A symbolized frame as a report lists it.
ReportFrame ReportFrameOf(const Frame& frame);
// A frame table's row as the report writes it.
nlohmann::json FrameJson(const ReportFrame& frame);
// One entry of the leaks', peak's and sites' lists as the report writes it.
nlohmann::json SiteRowJson(const LeakSite& site);
nlohmann::json SiteRowJson(const PeakSite& site);
nlohmann::json SiteRowJson(const AllocSite& site);

// Reads a report's typed sections, checking every field's type as the
// schema states it. Fields it does not know are ignored; a missing one reads
// as 0 or "". False on the first field of the wrong type or out of range,
// with `error` naming it (`leaks.device.sites[2].bytes is -5, expected a
// count (not negative)`). A `stack` index past `frame_table` is an error.
bool ReadReportModel(const nlohmann::json& doc, ReportModel* out, std::string* error);

// The field checks ReadReportModel is made of, for the sections it does not
// type (the tools' validator): each records the first problem, with the
// field's path.
class ReportFieldReader {
 public:
  const std::string& problem() const { return problem_; }
  bool failed() const { return !problem_.empty(); }
  void Fail(const std::string& path, const std::string& what);
  void Expected(const std::string& path, const nlohmann::json& v, const char* expected);

  static std::string Join(const std::string& path, const char* key);
  static std::string Element(std::string path, size_t i);  // "path[i]"
  // The member `key` of `obj`, when `obj` is an object that has it; null
  // (and no problem) when absent or null.
  static const nlohmann::json* Member(const nlohmann::json& obj, const char* key);

  // A byte count, a count or nanoseconds: an integer in [0, 2^53].
  uint64_t Count(const nlohmann::json& v, const std::string& path);
  uint64_t CountAt(const nlohmann::json& obj, const std::string& path, const char* key);
  int64_t IntegerAt(const nlohmann::json& obj, const std::string& path, const char* key);
  // A rate or a window bound: a finite number within +-2^53.
  double RealAt(const nlohmann::json& obj, const std::string& path, const char* key);
  std::string TextAt(const nlohmann::json& obj, const std::string& path, const char* key);
  std::optional<std::string> OptionalTextAt(const nlohmann::json& obj, const std::string& path,
                                            const char* key);
  // An object or an array member; null when absent, null or mistyped (the
  // last a problem).
  const nlohmann::json* ObjectAt(const nlohmann::json& obj, const std::string& path,
                                 const char* key);
  const nlohmann::json* ArrayAt(const nlohmann::json& obj, const std::string& path,
                                const char* key);
  std::vector<std::string> TextsAt(const nlohmann::json& obj, const std::string& path,
                                   const char* key);
  CountMap CountMapAt(const nlohmann::json& obj, const std::string& path, const char* key);
  // The counts `fields` of `obj` into `out`.
  template <typename T>
  void CountsAt(const nlohmann::json& obj, const std::string& path,
                std::span<const CountField<T>> fields, T* out) {
    for (const CountField<T>& f : fields) out->*f.member = CountAt(obj, path, f.key);
  }
  // Calls `each(element, its path)` on every element of the array `key` of
  // `obj`, each of which must be an object (the first that is not is a
  // problem), until one fails.
  template <typename Each>
  void Objects(const nlohmann::json& obj, const std::string& path, const char* key,
               const Each& each) {
    const nlohmann::json* list = ArrayAt(obj, path, key);
    for (size_t i = 0; list != nullptr && i < list->size() && !failed(); ++i) {
      const std::string at = Element(Join(path, key), i);
      if (!(*list)[i].is_object()) {
        Expected(at, (*list)[i], "an object");
        return;
      }
      each((*list)[i], at);
    }
  }
  // A list of frames: a site's (version 1) or the frame table.
  std::vector<ReportFrame> Frames(const nlohmann::json& frames, const std::string& path);
  // What every site has; `stack` indices must be below `frame_table_size`.
  // False when `site` is not an object (a problem).
  bool Site(const nlohmann::json& site, const std::string& path, ReportSite* out);

  size_t frame_table_size = 0;

 private:
  std::string problem_;
};

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_REPORT_REPORT_MODEL_H_
