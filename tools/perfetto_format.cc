#include "tools/perfetto_format.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
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

// Element `i` of a trace event array, or nullptr when absent or not of the kind asked.
const json* Elem(const json& event, size_t i) {
  return event.is_array() && i < event.size() ? &event[i] : nullptr;
}

bool U64At(const json& event, size_t i, uint64_t* out) {
  const json* e = Elem(event, i);
  if (e == nullptr || !e->is_number_integer() || e->get<int64_t>() < 0) return false;
  *out = e->get<uint64_t>();
  return true;
}

bool IntAt(const json& event, size_t i, int64_t* out) {
  const json* e = Elem(event, i);
  if (e == nullptr || !e->is_number_integer()) return false;
  *out = e->is_number_unsigned() && e->get<uint64_t>() > INT64_MAX ? INT64_MAX : e->get<int64_t>();
  return true;
}

bool StrAt(const json& event, size_t i, std::string* out) {
  const json* e = Elem(event, i);
  if (e == nullptr || !e->is_string()) return false;
  *out = e->get<std::string>();
  return true;
}

std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

class Writer {
 public:
  Writer(const json& doc, const ReportModel& model) : doc_(doc), model_(model) {
    pid_ = model.process.pid;
    if (pid_ == 0) pid_ = 1;  // a merged report has none; the viewers want one
  }

  std::string Build() {
    ProcessName();
    ThreadName(kEventsTid, "marks, peak, OOMs");
    const json& trace = Sub(doc_, "trace");
    if (trace.is_object() && Sub(trace, "events").is_array()) {
      FromTrace(trace);
    } else {
      FromTimeline();
    }
    const json other = {{"generator", "gpuwatch report --format perfetto"},
                        {"source", source_},
                        {"trigger", model_.trigger},
                        {"clock", "microseconds since gpuwatch attached"}};
    std::string out = std::move(events_);
    out += "],\"displayTimeUnit\":\"ns\",\"otherData\":" + other.dump() + "}\n";
    return out;
  }

 private:
  // Each event is written out as it is made: a trace of a million events
  // holds its text, not a million JSON objects (issue 30 item 8).
  void Emit(const json& event) {
    if (events_.back() != '[') events_ += ',';
    events_ += event.dump();
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

  void FromTrace(const json& trace) {
    source_ = "trace";
    std::map<uint64_t, std::string> locations;
    const json& sites = Sub(trace, "sites");
    if (sites.is_array()) {
      for (const json& s : sites) locations[U64(s, "site")] = Str(s, "location");
    }
    const json& names = Sub(trace, "names");
    const json& phases = Sub(trace, "phases");
    uint64_t peak_bytes = 0;
    uint64_t peak_ns = 0;
    bool have_peak = false;
    uint64_t first_ns = UINT64_MAX;
    for (const json& e : Sub(trace, "events")) {
      std::string kind;
      uint64_t t = 0;
      if (!StrAt(e, 0, &kind) || !U64At(e, 1, &t)) continue;
      first_ns = std::min(first_ns, t);
      if (kind == "mem") {
        int64_t device = 0;
        uint64_t bytes = 0;
        if (!IntAt(e, 2, &device) || !U64At(e, 3, &bytes)) continue;
        Counter("device " + std::to_string(device) + " memory", t, bytes);
      } else if (kind == "copy") {
        uint64_t end = 0;
        int64_t device = 0;
        uint64_t stream = 0;
        uint64_t bytes = 0;
        std::string direction;
        std::string host;
        uint64_t site = 0;
        if (!U64At(e, 2, &end) || !IntAt(e, 3, &device) || !U64At(e, 4, &stream) ||
            !U64At(e, 5, &bytes) || !StrAt(e, 6, &direction) || !StrAt(e, 7, &host) ||
            !U64At(e, 8, &site)) {
          continue;
        }
        const uint64_t ns = end > t ? end - t : 0;
        json args = {{"bytes", bytes}, {"direction", direction},
                     {"host", host},   {"location", locations[site]},
                     {"site", site},   {"duration_ns", ns}};
        if (ns != 0) args["gbps"] = static_cast<double>(bytes) / static_cast<double>(ns);
        std::string name = Upper(direction) + " " + FormatBytes(bytes);
        if (host != "device" && host != "unknown") name += " " + host;
        Slice(name, "copy", SliceTrack("copies", device, stream), t, end, std::move(args));
      } else if (kind == "kernel") {
        uint64_t end = 0;
        int64_t device = 0;
        uint64_t stream = 0;
        uint64_t index = 0;
        if (!U64At(e, 2, &end) || !IntAt(e, 3, &device) || !U64At(e, 4, &stream) ||
            !U64At(e, 5, &index)) {
          continue;
        }
        std::string name = "(unknown kernel)";
        if (names.is_array() && index < names.size() && names[index].is_string()) {
          name = names[index].get<std::string>();
        }
        Slice(name, "kernel", SliceTrack("kernels", device, stream), t, end,
              {{"duration_ns", end > t ? end - t : 0}});
      } else if (kind == "phase") {
        uint64_t end = 0;
        uint64_t thread = 0;
        uint64_t index = 0;
        if (!U64At(e, 2, &end) || !U64At(e, 3, &thread) || !U64At(e, 4, &index)) continue;
        std::string path = "(unknown phase)";
        if (phases.is_array() && index < phases.size() && phases[index].is_string()) {
          path = phases[index].get<std::string>();
        }
        const size_t slash = path.rfind('/');
        Slice(slash == std::string::npos ? path : path.substr(slash + 1), "phase",
              PhaseTrack(thread), t, end, {{"path", path}, {"duration_ns", end > t ? end - t : 0}});
      } else if (kind == "mark") {
        uint64_t ordinal = 0;
        std::string label;
        if (!U64At(e, 2, &ordinal) || !StrAt(e, 3, &label)) continue;
        Instant(label.empty() ? "mark " + std::to_string(ordinal) : label, "mark", t,
                {{"mark", ordinal}, {"label", label}});
      } else if (kind == "peak") {
        uint64_t bytes = 0;
        if (!U64At(e, 2, &bytes)) continue;
        // Each rise of the peak is recorded; the timeline shows the highest.
        if (!have_peak || bytes >= peak_bytes) {
          have_peak = true;
          peak_bytes = bytes;
          peak_ns = t;
        }
      } else if (kind == "oom") {
        int64_t device = 0;
        uint64_t bytes = 0;
        std::string memory;
        uint64_t site = 0;
        if (!IntAt(e, 2, &device) || !U64At(e, 3, &bytes) || !StrAt(e, 4, &memory) ||
            !U64At(e, 5, &site)) {
          continue;
        }
        Instant("OOM: " + FormatBytes(bytes) + " " + memory + " at " + locations[site], "oom", t,
                {{"bytes", bytes},
                 {"kind", memory},
                 {"device", device},
                 {"location", locations[site]},
                 {"site", site}});
      }
    }
    if (have_peak) {
      Instant("peak " + FormatBytes(peak_bytes), "peak", peak_ns, {{"device_bytes", peak_bytes}});
    }
    const uint64_t dropped = U64(trace, "dropped");
    if (dropped != 0) {
      Instant("trace: " + std::to_string(dropped) + " older events dropped", "gpuwatch",
              first_ns == UINT64_MAX ? 0 : first_ns,
              {{"dropped", dropped}, {"capacity", U64(trace, "capacity")}});
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
      Instant("OOM: " + FormatBytes(oom.size) + " " + oom.kind + " at " + oom.location, "oom",
              model_.process.elapsed_ns,
              {{"bytes", oom.size},
               {"kind", oom.kind},
               {"device", device},
               {"location", oom.location}});
    }
  }

  const json& doc_;  // for its trace section
  const ReportModel& model_;
  uint64_t pid_ = 1;
  std::string events_ = "{\"traceEvents\":[";  // the document so far
  std::string source_;
  std::map<std::tuple<std::string, int64_t, uint64_t>, int> tracks_;
};

}  // namespace

std::string PerfettoTrace(const Report& report) { return Writer(report.doc, report.model).Build(); }

}  // namespace gpuwatch::tools
