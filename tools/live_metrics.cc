#include "tools/live_metrics.h"

#include <algorithm>
#include <optional>
#include <utility>

namespace gpuwatch::tools {
namespace {

using json = nlohmann::json;
using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

struct Spec {
  const char* name;
  MetricType type;
  const char* help;
};

// Every family, in the order they are exposed.
constexpr Spec kSpecs[] = {
    {"gpuwatch_process_start_time_seconds", MetricType::Gauge,
     "Start time of the process under gpuwatch since the Unix epoch in seconds."},
    {"gpuwatch_device_memory_live_bytes", MetricType::Gauge,
     "Device memory the process holds now, per device."},
    {"gpuwatch_device_memory_peak_bytes", MetricType::Gauge,
     "Highest device memory the process has held, per device."},
    {"gpuwatch_device_memory_total_bytes", MetricType::Gauge,
     "Memory of the device, when the driver reports it."},
    {"gpuwatch_memory_live_bytes", MetricType::Gauge,
     "Memory the process holds now, per kind (device, pool, managed, pinned_host, ...)."},
    {"gpuwatch_memory_peak_bytes", MetricType::Gauge,
     "Highest memory the process has held, per kind."},
    {"gpuwatch_allocations_total", MetricType::Counter, "Allocations made, per kind."},
    {"gpuwatch_allocated_bytes_total", MetricType::Counter, "Bytes allocated, per kind."},
    {"gpuwatch_frees_total", MetricType::Counter, "Allocations freed, per kind."},
    {"gpuwatch_out_of_memory_total", MetricType::Counter,
     "Allocations that failed for lack of memory."},
    {"gpuwatch_kernel_launches_total", MetricType::Counter, "Kernels launched."},
    {"gpuwatch_unknown_frees_total", MetricType::Counter,
     "Frees of addresses gpuwatch did not see allocated."},
    {"gpuwatch_transfers_total", MetricType::Counter,
     "Memory copies, per direction and kind of host memory."},
    {"gpuwatch_transfer_bytes_total", MetricType::Counter,
     "Bytes copied, per direction and kind of host memory."},
    {"gpuwatch_timed_transfers_total", MetricType::Counter,
     "Memory copies whose duration was measured, per direction and kind of host memory."},
    {"gpuwatch_transfer_seconds_total", MetricType::Counter,
     "Time spent in the timed memory copies, per direction and kind of host memory."},
    {"gpuwatch_marks_total", MetricType::Counter,
     "Iteration marks (gpuwatch_mark) the process has made."},
    {"gpuwatch_site_live_bytes", MetricType::Gauge,
     "Device memory held now per allocation site (file:line (function)), for the largest "
     "sites of each process; site=\"other\" is the rest."},
    {"gpuwatch_exporter_processes", MetricType::Gauge,
     "Processes under gpuwatch that answered this scrape."},
    {"gpuwatch_exporter_scrape_problems", MetricType::Gauge,
     "Processes in the live directory that did not answer this scrape properly."},
};

class Builder {
 public:
  Builder() {
    for (const Spec& s : kSpecs) {
      MetricFamily f;
      f.name = s.name;
      f.help = s.help;
      f.type = s.type;
      families_.push_back(std::move(f));
    }
  }

  void Add(const char* name, std::vector<ClientMetric::Label> labels, double value) {
    auto it = std::find_if(families_.begin(), families_.end(),
                           [name](const MetricFamily& f) { return f.name == name; });
    if (it == families_.end()) return;
    ClientMetric m;
    m.label = std::move(labels);
    if (it->type == MetricType::Counter) {
      m.counter.value = value;
    } else {
      m.gauge.value = value;
    }
    it->metric.push_back(std::move(m));
  }

  std::vector<MetricFamily> Take() {
    std::vector<MetricFamily> out;
    for (MetricFamily& f : families_) {
      const bool always =
          f.name == "gpuwatch_exporter_processes" || f.name == "gpuwatch_exporter_scrape_problems";
      if (!f.metric.empty() || always) out.push_back(std::move(f));
    }
    return out;
  }

 private:
  std::vector<MetricFamily> families_;
};

std::optional<double> Number(const json& object, const char* key) {
  if (!object.is_object()) return std::nullopt;
  const auto it = object.find(key);
  if (it == object.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

std::string String(const json& object, const char* key) {
  if (!object.is_object()) return "";
  const auto it = object.find(key);
  if (it == object.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_number()) return it->dump();
  return "";
}

std::vector<ClientMetric::Label> With(std::vector<ClientMetric::Label> labels,
                                      const std::string& name, const std::string& value) {
  labels.push_back({name, value});
  return labels;
}

const json& Array(const json& object, const char* key) {
  static const json kEmpty = json::array();
  if (!object.is_object()) return kEmpty;
  const auto it = object.find(key);
  return it != object.end() && it->is_array() ? *it : kEmpty;
}

void AddSites(Builder& b, const json& state, const std::vector<ClientMetric::Label>& labels,
              size_t top) {
  // Sites that read the same are one series (a label set may appear once).
  std::vector<std::pair<std::string, double>> sites;
  for (const json& s : Array(state, "sites")) {
    const auto bytes = Number(s, "live_bytes");
    if (!bytes.has_value()) continue;
    const std::string label = SiteLabel(s);
    auto it = std::find_if(sites.begin(), sites.end(),
                           [&label](const auto& e) { return e.first == label; });
    if (it == sites.end()) {
      sites.emplace_back(label, *bytes);
    } else {
      it->second += *bytes;
    }
  }
  std::stable_sort(sites.begin(), sites.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  double other = 0;
  if (state.contains("other_sites")) other = Number(state["other_sites"], "live_bytes").value_or(0);
  for (size_t i = top; i < sites.size(); ++i) other += sites[i].second;
  if (sites.size() > top) sites.resize(top);
  for (const auto& [site, bytes] : sites) {
    b.Add("gpuwatch_site_live_bytes", With(labels, "site", site), bytes);
  }
  b.Add("gpuwatch_site_live_bytes", With(labels, "site", "other"), other);
}

void AddProcess(Builder& b, const LiveProcess& p, const LiveMetricsOptions& options) {
  const json& st = p.state;
  const std::vector<ClientMetric::Label> labels = {
      {"pid", std::to_string(p.pid)},
      {"command", CommandLabel(st.is_object() ? st.value("command", json()) : json())},
      {"rank", String(st, "rank")},
      {"host", String(st, "host")}};
  if (const auto ms = Number(st, "started_unix_ms")) {
    b.Add("gpuwatch_process_start_time_seconds", labels, *ms / 1000.0);
  }
  for (const json& d : Array(st, "devices")) {
    const std::vector<ClientMetric::Label> dl = With(labels, "device", String(d, "device"));
    if (const auto v = Number(d, "live_bytes")) b.Add("gpuwatch_device_memory_live_bytes", dl, *v);
    if (const auto v = Number(d, "peak_bytes")) b.Add("gpuwatch_device_memory_peak_bytes", dl, *v);
    if (const auto v = Number(d, "total_bytes")) {
      b.Add("gpuwatch_device_memory_total_bytes", dl, *v);
    }
  }
  if (st.contains("kinds") && st["kinds"].is_object()) {
    for (const auto& [kind, k] : st["kinds"].items()) {
      const std::vector<ClientMetric::Label> kl = With(labels, "kind", kind);
      if (const auto v = Number(k, "live_bytes")) b.Add("gpuwatch_memory_live_bytes", kl, *v);
      if (const auto v = Number(k, "peak_bytes")) b.Add("gpuwatch_memory_peak_bytes", kl, *v);
      if (const auto v = Number(k, "allocs")) b.Add("gpuwatch_allocations_total", kl, *v);
      if (const auto v = Number(k, "alloc_bytes")) b.Add("gpuwatch_allocated_bytes_total", kl, *v);
      if (const auto v = Number(k, "frees")) b.Add("gpuwatch_frees_total", kl, *v);
    }
  }
  if (st.contains("counters")) {
    const json& c = st["counters"];
    if (const auto v = Number(c, "ooms")) b.Add("gpuwatch_out_of_memory_total", labels, *v);
    if (const auto v = Number(c, "kernel_launches")) {
      b.Add("gpuwatch_kernel_launches_total", labels, *v);
    }
    if (const auto v = Number(c, "unknown_frees"))
      b.Add("gpuwatch_unknown_frees_total", labels, *v);
  }
  for (const json& t : Array(st, "transfers")) {
    const std::vector<ClientMetric::Label> tl =
        With(With(labels, "direction", String(t, "direction")), "host_memory", String(t, "host"));
    if (const auto v = Number(t, "count")) b.Add("gpuwatch_transfers_total", tl, *v);
    if (const auto v = Number(t, "bytes")) b.Add("gpuwatch_transfer_bytes_total", tl, *v);
    if (const auto v = Number(t, "timed_count")) b.Add("gpuwatch_timed_transfers_total", tl, *v);
    if (const auto v = Number(t, "duration_ns")) {
      b.Add("gpuwatch_transfer_seconds_total", tl, *v / 1e9);
    }
  }
  if (const auto v = Number(st, "marks")) b.Add("gpuwatch_marks_total", labels, *v);
  AddSites(b, st, labels, options.top);
}

// The first `max_bytes` bytes of `s`, not cutting a UTF-8 character.
std::string Cut(const std::string& s, size_t max_bytes) {
  size_t n = std::min(max_bytes, s.size());
  while (n > 0 && n < s.size() && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n);
}

}  // namespace

std::string CommandLabel(const json& command, size_t max_bytes) {
  std::string text;
  if (command.is_array()) {
    for (const json& arg : command) {
      if (!arg.is_string()) continue;
      std::string a = arg.get<std::string>();
      if (text.empty()) {
        const size_t slash = a.find_last_of('/');
        if (slash != std::string::npos && slash + 1 < a.size()) a = a.substr(slash + 1);
        text = a;
      } else {
        text += " " + a;
      }
    }
  } else if (command.is_string()) {
    text = command.get<std::string>();
  }
  if (text.size() <= max_bytes) return text;
  const std::string dots = "...";
  return Cut(text, max_bytes > dots.size() ? max_bytes - dots.size() : 0) + dots;
}

std::string SiteLabel(const json& site) {
  std::string location = String(site, "location");
  if (location.empty()) location = "(unknown)";
  std::string function = String(site, "function");
  if (function.empty()) return location;
  // A template's name can run to kilobytes; a label is read by people.
  constexpr size_t kMaxFunction = 80;
  if (function.size() > kMaxFunction) function = Cut(function, kMaxFunction - 3) + "...";
  return location + " (" + function + ")";
}

std::vector<MetricFamily> LiveMetrics(const LiveScan& scan, const LiveMetricsOptions& options) {
  Builder b;
  for (const LiveProcess& p : scan.processes) AddProcess(b, p, options);
  b.Add("gpuwatch_exporter_processes", {}, static_cast<double>(scan.processes.size()));
  b.Add("gpuwatch_exporter_scrape_problems", {}, static_cast<double>(scan.problems.size()));
  return b.Take();
}

}  // namespace gpuwatch::tools
