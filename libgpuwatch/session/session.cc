#include "libgpuwatch/session/session.h"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "libgpuwatch/report/report_model.h"
#include "libgpuwatch/stacks/python_frames.h"
#include "libgpuwatch/stacks/python_stack.h"
#include "libgpuwatch/stacks/unwind.h"

namespace gpuwatch {

Recording::Recording(const Config& config, size_t trace_events, const PhaseTable* phase_table)
    : tracker(kMaxStacks),
      timeline(static_cast<uint64_t>(config.sample_ms)),
      phases(phase_table, &tracker) {
  tracker.SetPhases(&phases);
  if (trace_events == 0) return;
  trace = std::make_unique<Trace>(trace_events);
  if (trace->capacity() == 0) {
    trace.reset();
    return;
  }
  tracker.SetTrace(trace.get());
  phases.SetTrace(trace.get());
}

Session::Session(Config config, std::string* warning, PhaseTable* phases)
    : config_(std::move(config)),
      own_phases_(phases == nullptr ? std::make_unique<PhaseTable>() : nullptr),
      phases_(phases != nullptr ? phases : own_phases_.get()),
      alloc_fns_(config_.alloc_fns) {
  if (config_.depth > 0) stacks_ = std::make_unique<StackTable>(kMaxStacks, kMaxStackBytes);
  const size_t trace_events =
      config_.trace_events > 0 ? static_cast<size_t>(config_.trace_events) : 0;
  auto* first = new Recording(config_, trace_events, phases_);
  phases_->SetStats(&first->phases);
  if (trace_events > 0 && first->trace == nullptr && warning != nullptr) {
    *warning = "cannot reserve the event trace (" + std::to_string(trace_events) +
               " events); the report has no trace";
  }
  recording_.store(first, std::memory_order_release);
}

Session::~Session() {
  phases_->SetStats(nullptr);
  delete recording_.load(std::memory_order_acquire);
}

bool Session::LoadSuppressions(std::string* error) {
  if (config_.suppressions.empty()) return true;
  auto loaded = std::make_unique<Suppressions>();
  if (!loaded->LoadFile(config_.suppressions, error)) return false;
  suppressions_ = std::move(loaded);
  return true;
}

void Session::SetGpuClock(uint64_t gpu_now_ns) {
  Recording& r = recording();
  if (r.trace == nullptr) return;
  r.trace->SetGpuClockOffset(static_cast<int64_t>(r.tracker.NowNs()) -
                             static_cast<int64_t>(gpu_now_ns));
  r.trace_gpu = true;
}

void Session::StartChildRecording() {
  Recording& parent = recording();
  const size_t trace_events = parent.trace != nullptr ? parent.trace->capacity() : 0;
  auto* child = new Recording(config_, trace_events, phases_);
  child->tracker.SetPaused(parent.tracker.paused());
  if (child->trace != nullptr && parent.trace != nullptr) {
    // The child's clock starts now: GPU times shift by the time since attach.
    child->trace->SetGpuClockOffset(parent.trace->gpu_clock_offset() +
                                    static_cast<int64_t>(child->tracker.NowNs()) -
                                    static_cast<int64_t>(parent.tracker.NowNs()));
    child->trace_gpu = parent.trace_gpu;
  }
  child->parent.reset(&parent);  // kept: a thread may still be inside it
  phases_->SetStats(&child->phases);
  recording_.store(child, std::memory_order_release);
}

void Session::LockForFork() {
  Recording& r = recording();
  if (stacks_ != nullptr) stacks_->LockForFork();
  r.ForEachForkLocked([](auto& table) { table.LockForFork(); });
  graphs_.LockForFork();
  // A phase table given to the session is its owner's to lock (the
  // interposition layer's fork handlers take it).
  if (own_phases_ != nullptr) own_phases_->LockForFork();
}

void Session::UnlockAfterFork() {
  Recording& r = recording();
  if (own_phases_ != nullptr) own_phases_->UnlockAfterFork();
  graphs_.UnlockAfterFork();
  // The order of unlocking does not matter.
  r.ForEachForkLocked([](auto& table) { table.UnlockAfterFork(); });
  if (stacks_ != nullptr) stacks_->UnlockAfterFork();
}

namespace {

// The live memory a report shows: as a callback captured it, else now. Built
// in place (a snapshot of a big process is tens of MiB: never copied twice).
TrackerSnapshot LiveMemory(const Recording& r, const TrackerSnapshot* captured) {
  if (captured != nullptr) return *captured;
  return r.tracker.Snapshot();
}

}  // namespace

SessionReport::SessionReport(const Session& session, ReportRequest request)
    : session_(session),
      context_(std::move(request.context)),
      snapshot_(LiveMemory(session.recording(), request.captured)),
      transfers_(session.recording().transfers.Snapshot()),
      kernels_(session.recording().kernels.Snapshot()),
      cuda_errors_(session.recording().errors.Snapshot(session.recording().kernels)),
      timeline_(session.recording().timeline.Snapshot()),
      own_sites_(request.sites != nullptr
                     ? nullptr
                     : std::make_unique<SiteResolver>(
                           session.stacks(),
                           session.stacks() != nullptr ? request.symbolizer : nullptr,
                           session.alloc_fns())),
      sites_(request.sites != nullptr ? request.sites : own_sites_.get()) {
  const Recording& r = session.recording();
  if (r.trace != nullptr) {
    trace_ = r.trace->Snapshot();
    context_.trace = &trace_;
  }
  const Config& config = session.config();
  context_.transfers = &transfers_;
  context_.kernels = &kernels_;
  context_.cuda_errors = &cuda_errors_;
  context_.kernel_timing = config.kernel_timing;
  context_.timeline = &timeline_;
  phases_ = SnapshotPhases(session.phases(), r.phases);
  context_.phases = &phases_;
  regions_ = r.regions.Snapshot();
  // A capture by site has no allocation addresses to place regions in.
  if (!snapshot_.live_by_site) context_.regions = &regions_;
  context_.lifecycle = LifecycleFiguresOf(r.lifecycle);
  context_.suppressions = session.suppressions();
  context_.depth = config.depth;
  context_.stacks_dropped = session.stacks() != nullptr ? session.stacks()->dropped() : 0;
  const StackTable* stacks = session.stacks();
  if (const PyFrameTable* py = stacks != nullptr ? stacks->python_frames() : nullptr)
    context_.python_frames_dropped = py->dropped();
  context_.tool_frames = ToolFramesSeen();
  context_.unwinder = config.depth > 0 ? UnwindMethodName(ActiveUnwindMethod()) : "none";
  context_.unwind_fallbacks = CfiFallbacks();
  sites_->set_pytorch_per_tensor(PytorchAllocatesPerTensor(context_.pytorch_allocator));
}

// A kept resolver keeps its canonical ids, not this report's frames.
SessionReport::~SessionReport() {
  if (own_sites_ == nullptr) sites_->ReleaseFrames();
}

void SessionReport::Build(const TextFlush* flush) {
  analysis_ = AnalyzeReport(snapshot_, context_, sites_);
  json_ = BuildReportJson(snapshot_, context_, sites_, analysis_, flush);
}

size_t SessionReport::OpenTeardownSlot() { return gpuwatch::OpenTeardownSlot(&json_); }

uint64_t SessionReport::leaked_device_bytes() {
  return LeakedDeviceBytes(analysis_, sites_, session_.suppressions());
}

std::string SessionReport::Summary(const std::string& path) {
  return BuildSummaryText(snapshot_, context_, analysis_, sites_, path);
}

namespace {

// One leaks section of the sites `rows` name, merged when they read the
// same, largest first, at most kMaxSitesPerSection listed.
LeakList LiveSinceSection(const Tracker::SiteRows& rows, const Suppressions* suppressions,
                          SiteResolver* sites) {
  std::vector<uint32_t> ids;
  ids.reserve(rows.size());
  for (const auto& row : rows) ids.push_back(row.first);
  sites->Prepare(ids);
  std::map<uint32_t, Tracker::SiteFigures> merged;
  for (const auto& [id, f] : rows) {
    Tracker::SiteFigures& m = merged[sites->Canonical(id)];
    m.bytes += f.bytes;
    m.count += f.count;
    for (int k = 0; k < kNumMemKinds; ++k) m.kind_bytes[k] += f.kind_bytes[k];
  }
  Tracker::SiteRows order(merged.begin(), merged.end());
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.second.bytes > b.second.bytes; });
  LeakList out;
  for (const auto& [id, f] : order) {
    out.bytes += f.bytes;
    out.count += f.count;
    if (out.sites.size() >= kMaxSitesPerSection) {
      out.omitted_bytes += f.bytes;
      ++out.omitted_sites;
      continue;
    }
    LeakSite& site = out.sites.emplace_back();
    site.site = id;
    site.location = sites->LocationOf(id);
    for (const Frame& frame : sites->FramesOf(id)) site.frames.push_back(ReportFrameOf(frame));
    const SiteClass& c = sites->ClassOf(id, suppressions, SuppressionKind::kLeak);
    if (!c.category.empty() || c.category_off) site.category = std::string(c.category);
    if (c.suppressed != nullptr) site.suppressed = c.suppressed->Text();
    site.bytes = f.bytes;
    site.count = f.count;
    for (int k = 0; k < kNumMemKinds; ++k) {
      if (f.kind_bytes[k] != 0) site.kinds[MemKindName(static_cast<MemKind>(k))] = f.kind_bytes[k];
    }
    out.split.Add(f.bytes, f.count, c.suppressed != nullptr, c.category);
  }
  return out;
}

}  // namespace

std::string LiveSinceJson(const Session& session, Tracker::Point point, Symbolizer* symbolizer,
                          bool pytorch_per_tensor) {
  const Tracker& tracker = session.recording().tracker;
  SiteResolver sites(session.stacks(), session.stacks() != nullptr ? symbolizer : nullptr,
                     session.alloc_fns());
  sites.set_pytorch_per_tensor(pytorch_per_tensor);
  const Suppressions* suppressions = session.suppressions();
  const std::vector<Tracker::SiteRows> rows = tracker.LiveSince(point, {kDeviceKinds, kHostKinds});
  return DumpReport(LiveSinceJson(LiveSinceSection(rows[0], suppressions, &sites),
                                  LiveSinceSection(rows[1], suppressions, &sites),
                                  tracker.WindowPeak()));
}

}  // namespace gpuwatch
