// The report's activity sections as types (report_model.h has the rest):
// `transfers` (copies by direction and host memory kind, by site, and the
// findings), `kernels`, `timeline` (the device bytes sampled over the run,
// and the sites that held most) and `lifecycle` (start-up, time blocked,
// teardown), with their JSON writers and readers. ReportModel::ToJson and
// ReadReportModel call them; docs/report-format.md says what each field
// means.
//
// Figures that are written only when a count is not 0 (a copy's or a
// kernel's timing) are written by that rule, so that the JSON the library
// writes and the JSON a model read from it writes are the same.

// report_model.h includes this file in its middle (these types build on
// ReportSite and the field tables); included first, this brings it in.
#include "libgpuwatch/report/report_model.h"

#ifndef GPUWATCH_LIBGPUWATCH_REPORT_MODEL_ACTIVITY_H_
#define GPUWATCH_LIBGPUWATCH_REPORT_MODEL_ACTIVITY_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace gpuwatch {

class ReportFieldReader;

// Copies: count and bytes; with timing, the copies timed and their GPU time.
// timed_count and duration_ns are written when timed_count is not 0.
// clang-format off
#define GPUWATCH_TRANSFER_COUNTS(X) \
  X(count, kSum) X(bytes, kSum) X(timed_count, kSum) X(duration_ns, kSum)
// clang-format on
struct TransferFigures {
  GPUWATCH_COUNTS(TransferFigures, GPUWATCH_TRANSFER_COUNTS)
  // Timed bytes / duration_ns: with the timing in a process's report;
  // merge leaves it out (a merged report's totals have none).
  std::optional<double> gbps;
};

// transfers.totals[]: one direction and host memory kind.
struct TransferTotal : TransferFigures {
  std::string direction;
  std::string host;
};

// transfers.sites[].histogram[]: copies of min_bytes up to twice that.
struct TransferBucket {
  uint64_t min_bytes = 0;
  uint64_t count = 0;
};

// transfers.sites[]: copies of one site; `all` is written into the entry.
// clang-format off
#define GPUWATCH_TRANSFER_SITE_COUNTS(X) X(sync, kSum) X(async, kSum)
// clang-format on
struct TransferSite : ReportSite {
  GPUWATCH_COUNTS(TransferSite, GPUWATCH_TRANSFER_SITE_COUNTS)
  TransferFigures all;
  std::map<std::string, TransferFigures, std::less<>> directions;
  std::map<std::string, TransferFigures, std::less<>> hosts;
  std::vector<TransferBucket> histogram;
};

// transfers.findings[]: what to change at one site.
// clang-format off
#define GPUWATCH_TRANSFER_FINDING_COUNTS(X) X(count, kSum) X(bytes, kSum)
// clang-format on
struct TransferFindingRow {
  GPUWATCH_COUNTS(TransferFindingRow, GPUWATCH_TRANSFER_FINDING_COUNTS)
  std::string type;  // "pageable", "small_copies", "sync_d2h_loop", "slow_copies"
  uint64_t site = 0;
  std::string location;
  std::string message;
  std::string advice;
  std::string direction;            // "": absent (pageable and slow_copies have one)
  std::optional<double> gbps;       // slow_copies
  std::optional<double> best_gbps;  // slow_copies
};

// clang-format off
#define GPUWATCH_TRANSFERS_COUNTS(X) X(unmatched_records, kSum) X(pending_dropped, kSum)
// clang-format on
struct ReportTransfers {
  GPUWATCH_COUNTS(ReportTransfers, GPUWATCH_TRANSFERS_COUNTS)
  std::vector<TransferTotal> totals;
  std::vector<TransferSite> sites;
  std::vector<TransferFindingRow> findings;
  // The best GB/s per direction. A merged report has the totals only: no
  // best_gbps, unmatched_records and pending_dropped (false).
  std::map<std::string, double, std::less<>> best_gbps;
  bool process_figures = true;
};

// kernels.kernels[]: launches of one kernel; timed and gpu_ns are written
// when timed is not 0.
// clang-format off
#define GPUWATCH_KERNEL_COUNTS(X) X(launches, kSum) X(timed, kSum) X(gpu_ns, kSum)
// clang-format on
struct KernelRow {
  GPUWATCH_COUNTS(KernelRow, GPUWATCH_KERNEL_COUNTS)
  std::string name;  // demangled
  std::string mangled;
};

// clang-format off
#define GPUWATCH_KERNELS_COUNTS(X) X(launches, kSum) X(distinct, kSum)
// clang-format on
struct ReportKernels {
  GPUWATCH_COUNTS(ReportKernels, GPUWATCH_KERNELS_COUNTS)
  bool timing = false;  // GPUWATCH_KERNEL_TIMING was on
  std::vector<KernelRow> kernels;
};

// timeline.marks.samples[] and timeline.periodic.samples[]; mark and label
// are written when mark is not 0 (the marks' samples).
struct TimelineSample {
  uint64_t time_ns = 0;
  uint64_t device_bytes = 0;
  uint64_t mark = 0;
  std::string label;
};

struct TimelineSeries {
  uint64_t total = 0;  // samples taken; `samples` are those kept
  std::vector<TimelineSample> samples;
};

// timeline.sites[]: one of the sites that held the most, with its bytes at
// every kept sample of both series.
struct TimelineSite : ReportSite {
  uint64_t max_bytes = 0;
  std::vector<uint64_t> marks;
  std::vector<uint64_t> periodic;
};

struct ReportTimeline {
  uint64_t capacity = 0;
  uint64_t interval_ms = 0;
  TimelineSeries marks;
  TimelineSeries periodic;
  std::vector<TimelineSite> sites;
};

// lifecycle.blocked.K: the host's time inside one kind of synchronization.
// clang-format off
#define GPUWATCH_BLOCKED_COUNTS(X) X(ns, kSum) X(count, kSum)
// clang-format on
struct BlockedRow {
  GPUWATCH_COUNTS(BlockedRow, GPUWATCH_BLOCKED_COUNTS)
};

// lifecycle.contexts.
// clang-format off
#define GPUWATCH_CONTEXT_COUNTS(X)                                                   \
  X(created, kSum) X(destroyed, kSum) X(freed_count, kSum) X(freed_bytes, kSum) \
  X(destroys_kept, kSum)
// clang-format on
struct ContextFigures {
  GPUWATCH_COUNTS(ContextFigures, GPUWATCH_CONTEXT_COUNTS)
};

// clang-format off
#define GPUWATCH_LIFECYCLE_COUNTS(X) \
  X(first_call_ns, kMin) X(context_ready_ns, kMin) X(first_launch_ns, kMin)
// clang-format on
// lifecycle.findings[]: what the process's lifecycle says about how it uses
// CUDA. type "context_churn": contexts created and destroyed again and again
// while it ran (a context per request or job instead of one for the
// process), with the counts.
// clang-format off
#define GPUWATCH_LIFECYCLE_FINDING_COUNTS(X) X(contexts_created, kSum) X(contexts_destroyed, kSum)
// clang-format on
// type "alloc_churn": a site that allocated and freed again and again
// (report.h's ChurnSite): its site, location and figures, written instead of
// the context counts.
// clang-format off
#define GPUWATCH_ALLOC_CHURN_COUNTS(X) \
  X(site, kMax) X(count, kSum) X(cycles, kSum) X(bytes, kSum) X(call_ns, kSum)
// clang-format on
struct AllocChurn {
  GPUWATCH_COUNTS(AllocChurn, GPUWATCH_ALLOC_CHURN_COUNTS)
  std::string location;
};
struct LifecycleFinding {
  GPUWATCH_COUNTS(LifecycleFinding, GPUWATCH_LIFECYCLE_FINDING_COUNTS)
  std::string type;
  std::optional<AllocChurn> churn;  // type "alloc_churn"
};
inline constexpr const char* kAllocChurnType = "alloc_churn";
// Contexts destroyed while a process ran from which on that is a finding.
inline constexpr uint64_t kContextChurnMin = 3;

// The words of a context_churn finding (the exit summary's and the text
// report's): the counts, and what to do.
std::string ContextChurnText(uint64_t created, uint64_t destroyed);
// The words of an alloc_churn finding: count, cycles, time, location.
std::string AllocChurnText(const AllocChurn& c);
// The words of any finding (one of the two above); "" for a type this
// version does not know.
std::string FindingText(const LifecycleFinding& f);

struct ReportLifecycle {
  GPUWATCH_COUNTS(ReportLifecycle, GPUWATCH_LIFECYCLE_COUNTS)
  bool first_call_observed = false;
  std::map<std::string, BlockedRow, std::less<>> blocked;  // "device", "stream", ...
  uint64_t blocked_total_ns = 0;                           // blocked.total_ns
  // Written as null when absent: no context was ready, none destroyed at
  // exit, or the report was written before exit.
  std::optional<uint64_t> init_latency_ns;
  // The cold start: from the first CUDA call to the first kernel launch.
  std::optional<uint64_t> cold_start_ns;
  std::optional<uint64_t> teardown_ns;
  std::optional<int64_t> exit_status;
  ContextFigures contexts;
  std::vector<LifecycleFinding> findings;
};

// The sections as the report writes them.
nlohmann::json TransfersJson(const ReportTransfers& t);
nlohmann::json KernelsJson(const ReportKernels& k);
nlohmann::json TimelineJson(const ReportTimeline& t);
nlohmann::json LifecycleJson(const ReportLifecycle& l);

// The sections read from `section` (the report's member), every field's type
// checked; the first problem goes to `r`, named by its path.
ReportTransfers ReadTransfers(ReportFieldReader* r, const nlohmann::json& section);
ReportKernels ReadKernels(ReportFieldReader* r, const nlohmann::json& section);
ReportTimeline ReadTimeline(ReportFieldReader* r, const nlohmann::json& section);
ReportLifecycle ReadLifecycle(ReportFieldReader* r, const nlohmann::json& section);

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_REPORT_MODEL_ACTIVITY_H_
