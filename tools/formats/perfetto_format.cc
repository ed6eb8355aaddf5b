#include "tools/formats/perfetto_format.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "libgpuwatch/report/format.h"

namespace gpuwatch::tools {

namespace {

// Thread ids of the tracks: the instants first, then one per (kind, device,
// stream) in order of first appearance.
constexpr int kEventsTid = 1;
constexpr int kFirstSliceTid = 100;

// Trace-event timestamps are microseconds; reports count nanoseconds.
double Micros(uint64_t ns) { return static_cast<double>(ns) / 1000.0; }

std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

class Writer {
 public:
  Writer(const ReportModel& model, FILE* out)
      : model_(model), trace_(model.trace ? &*model.trace : nullptr), out_(out) {
    pid_ = model.process.pid;
    if (pid_ == 0) pid_ = 1;  // a merged report has none; the viewers want one
  }

  void Write() {
    ProcessName();
    ThreadName(kEventsTid, "marks, peak, OOMs");
    if (trace_ != nullptr) {
      FromTrace(*trace_);
    } else {
      FromTimeline();
    }
    FromCudaErrors();
    const json other = {{"generator", "gpuwatch report --format perfetto"},
                        {"source", source_},
                        {"trigger", model_.trigger},
                        {"clock", "microseconds since gpuwatch attached"}};
    text_ += "],\"displayTimeUnit\":\"ns\",\"otherData\":" + other.dump() + "}\n";
    Flush();
  }

 private:
  // Each event is written out as it is made: a trace of a million events
  // holds neither a million JSON objects (issue 30 item 8) nor their text.
  void Emit(const json& event) {
    if (!first_) text_ += ',';
    first_ = false;
    text_ += event.dump();
    if (text_.size() >= kFlushBytes) Flush();
  }

  void Flush() {
    std::fwrite(text_.data(), 1, text_.size(), out_);
    text_.clear();
  }

  void ProcessName() {
    const std::string command = CommandLine(model_.process);
    Emit({{"ph", "M"},
          {"name", "process_name"},
          {"pid", pid_},
          {"tid", 0},
          {"args", {{"name", command.empty() ? "gpuwatch" : "gpuwatch: " + command}}}});
  }

  void ThreadName(int tid, const std::string& name) {
    Emit({{"ph", "M"},
          {"name", "thread_name"},
          {"pid", pid_},
          {"tid", tid},
          {"args", {{"name", name}}}});
    // Keep the tracks in the order they were made, the instants on top.
    Emit({{"ph", "M"},
          {"name", "thread_sort_index"},
          {"pid", pid_},
          {"tid", tid},
          {"args", {{"sort_index", tid}}}});
  }

  // The track of copies or kernels on one device and stream.
  int SliceTrack(const std::string& what, int64_t device, uint64_t stream) {
    const auto key = std::make_tuple(what, device, stream);
    auto it = tracks_.find(key);
    if (it != tracks_.end()) return it->second;
    const int tid = kFirstSliceTid + static_cast<int>(tracks_.size());
    tracks_.emplace(key, tid);
    ThreadName(tid, what + " (device " + std::to_string(device) + ", stream " +
                        std::to_string(stream) + ")");
    return tid;
  }

  // The track of one thread's phases (NVTX ranges, gpuwatch_phase_push):
  // nested ranges are nested slices.
  int PhaseTrack(uint64_t thread) {
    const auto key = std::make_tuple(std::string("phases"), int64_t{-1}, thread);
    auto it = tracks_.find(key);
    if (it != tracks_.end()) return it->second;
    const int tid = kFirstSliceTid + static_cast<int>(tracks_.size());
    tracks_.emplace(key, tid);
    ThreadName(tid, thread == 0 ? std::string("phases (start/end ranges, any thread)")
                                : "phases (thread " + std::to_string(thread) + ")");
    return tid;
  }

  void Counter(const std::string& name, uint64_t time_ns, uint64_t bytes) {
    Emit({{"ph", "C"},
          {"name", name},
          {"pid", pid_},
          {"tid", 0},
          {"ts", Micros(time_ns)},
          {"args", {{"bytes", bytes}}}});
  }

  void Instant(const std::string& name, const char* category, uint64_t time_ns, json args) {
    Emit({{"ph", "i"},
          {"s", "t"},
          {"name", name},
          {"cat", category},
          {"pid", pid_},
          {"tid", kEventsTid},
          {"ts", Micros(time_ns)},
          {"args", std::move(args)}});
  }

  void Slice(const std::string& name, const char* category, int tid, uint64_t start_ns,
             uint64_t end_ns, json args) {
    Emit({{"ph", "X"},
          {"name", name},
          {"cat", category},
          {"pid", pid_},
          {"tid", tid},
          {"ts", Micros(start_ns)},
          {"dur", Micros(end_ns > start_ns ? end_ns - start_ns : 0)},
          {"args", std::move(args)}});
  }

  void FromTrace(const ReportTrace& trace) {
    source_ = "trace";
    uint64_t peak_bytes = 0;
    uint64_t peak_ns = 0;
    bool have_peak = false;
    uint64_t first_ns = UINT64_MAX;
    for (const ReportTraceEvent& e : trace.events) {
      const uint64_t t = e.time_ns;
      first_ns = std::min(first_ns, t);
      switch (e.type) {
        case TraceEventType::kMem:
          Counter("device " + std::to_string(e.device) + " memory", t, e.value);
          break;
        case TraceEventType::kCopy: {
          const ReportTraceSite& site = trace.SiteOf(e);
          const std::string& direction = trace.WordOf(e, 0);
          const std::string& host = trace.WordOf(e, 1);
          const uint64_t ns = e.end_ns > t ? e.end_ns - t : 0;
          json args = {{"bytes", e.value},          {"direction", direction}, {"host", host},
                       {"location", site.location}, {"site", site.site},      {"duration_ns", ns}};
          if (ns != 0) args["gbps"] = static_cast<double>(e.value) / static_cast<double>(ns);
          std::string name = Upper(direction) + " " + FormatBytes(e.value);
          if (host != "device" && host != "unknown") name += " " + host;
          Slice(name, "copy", SliceTrack("copies", e.device, e.stream), t, e.end_ns,
                std::move(args));
          break;
        }
        case TraceEventType::kKernel:
          Slice(trace.NameOf(e), "kernel", SliceTrack("kernels", e.device, e.stream), t, e.end_ns,
                {{"duration_ns", e.end_ns > t ? e.end_ns - t : 0}});
          break;
        case TraceEventType::kPhase: {
          const std::string& path = trace.PhaseOf(e);
          const size_t slash = path.rfind('/');
          Slice(slash == std::string::npos ? path : path.substr(slash + 1), "phase",
                PhaseTrack(e.stream), t, e.end_ns,
                {{"path", path}, {"duration_ns", e.end_ns > t ? e.end_ns - t : 0}});
          break;
        }
        case TraceEventType::kMark: {
          const std::string& label = trace.LabelOf(e);
          Instant(label.empty() ? "mark " + std::to_string(e.value) : label, "mark", t,
                  {{"mark", e.value}, {"label", label}});
          break;
        }
        case TraceEventType::kPeak:
          // Each rise of the peak is recorded; the timeline shows the highest.
          if (!have_peak || e.value >= peak_bytes) {
            have_peak = true;
            peak_bytes = e.value;
            peak_ns = t;
          }
          break;
        case TraceEventType::kOom: {
          const ReportTraceSite& site = trace.SiteOf(e);
          const std::string& memory = trace.WordOf(e, 0);
          Instant("OOM: " + FormatBytes(e.value) + " " + memory + " at " + site.location, "oom", t,
                  {{"bytes", e.value},
                   {"kind", memory},
                   {"device", e.device},
                   {"location", site.location},
                   {"site", site.site}});
          break;
        }
      }
    }
    if (have_peak) {
      Instant("peak " + FormatBytes(peak_bytes), "peak", peak_ns, {{"device_bytes", peak_bytes}});
    }
    if (trace.dropped != 0) {
      Instant("trace: " + std::to_string(trace.dropped) + " older events dropped", "gpuwatch",
              first_ns == UINT64_MAX ? 0 : first_ns,
              {{"dropped", trace.dropped}, {"capacity", trace.capacity}});
    }
  }

  // No event trace: what the timeline and the peak and OOM sections give.
  void FromTimeline() {
    source_ = "timeline samples (the report has no trace section)";
    Instant("no event trace in this report: memory from timeline samples, all devices", "gpuwatch",
            0, json::object());
    std::vector<std::pair<uint64_t, uint64_t>> samples;  // (time, device bytes)
    if (model_.timeline.has_value()) {
      const ReportTimeline& timeline = *model_.timeline;
      for (const TimelineSeries* series : {&timeline.marks, &timeline.periodic}) {
        for (const TimelineSample& s : series->samples) {
          samples.emplace_back(s.time_ns, s.device_bytes);
          if (series == &timeline.marks) {
            Instant(s.label.empty() ? "mark " + std::to_string(s.mark) : s.label, "mark", s.time_ns,
                    {{"mark", s.mark}, {"label", s.label}});
          }
        }
      }
    }
    std::sort(samples.begin(), samples.end());
    for (const auto& [t, bytes] : samples) Counter("device memory (sampled)", t, bytes);
    const ReportPeak& peak = model_.peak;
    if (peak.device_bytes != 0) {
      Instant("peak " + FormatBytes(peak.device_bytes), "peak", peak.sites_time_ns,
              {{"device_bytes", peak.device_bytes}});
    }
    if (model_.oom.has_value()) {
      const OomSite& oom = *model_.oom;
      // A device the report gives as negative (none known) shows as 0.
      const auto device = static_cast<uint64_t>(std::max<int64_t>(oom.device, 0));
      json args = {
          {"bytes", oom.size}, {"kind", oom.kind}, {"device", device}, {"location", oom.location}};
      if (oom.torch.has_value()) {
        args["torch_allocated_bytes"] = oom.torch->allocated_bytes;
        args["torch_reserved_bytes"] = oom.torch->reserved_bytes;
      }
      Instant("OOM: " + FormatBytes(oom.size) + " " + oom.kind + " at " + oom.location, "oom",
              model_.process.elapsed_ns, std::move(args));
    }
  }

  // Each context's sticky CUDA error, where it surfaced, and the kernels
  // launched before it since the last successful synchronization.
  void FromCudaErrors() {
    if (!model_.cuda_errors.has_value()) return;
    for (const StickyErrorSite& e : model_.cuda_errors->sticky) {
      json kernels = json::array();
      for (const KernelBeforeErrorSite& k : e.kernels) {
        kernels.push_back({{"kernel", k.kernel},
                           {"stream", k.stream},
                           {"before_ns", k.before_ns},
                           {"launched_at", k.location}});
      }
      Instant("CUDA error: " + e.name + " in " + e.api + " at " + e.location, "cuda_error",
              e.time_ns,
              {{"error", e.name},
               {"code", e.code},
               {"api", e.api},
               {"device", static_cast<uint64_t>(std::max<int64_t>(e.device, 0))},
               {"location", e.location},
               {"kernels_since_sync", std::move(kernels)}});
    }
  }

  const ReportModel& model_;
  const ReportTrace* trace_;
  uint64_t pid_ = 1;
  FILE* out_;
  static constexpr size_t kFlushBytes = size_t{1} << 20;
  std::string text_ = "{\"traceEvents\":[";  // what is not written yet
  bool first_ = true;
  std::string source_;
  std::map<std::tuple<std::string, int64_t, uint64_t>, int> tracks_;
};

}  // namespace

void WritePerfettoTrace(const Report& report, FILE* out) { Writer(report.model, out).Write(); }

}  // namespace gpuwatch::tools
