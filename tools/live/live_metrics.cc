#include "tools/live/live_metrics.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "tools/live/live_holders.h"
#include "tools/live/live_status.h"

namespace gpuwatch::tools {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

struct Spec {
  const char* name;
  MetricType type;
  const char* help;
};

// What the process is doing and what it holds as far as is known
// (live_holders.h, live_known.h): also of processes that did not answer.
constexpr char kStateHelp[] =
    "1 for each state the process is in, 0 for the others: running, idle (no CUDA activity for "
    "the exporter's --idle-after), stopped (SIGSTOP, a debugger), orphaned (the parent it had at "
    "attach died).";
constexpr char kIdleHelp[] =
    "Seconds since the process's last CUDA activity (allocation, free, copy, kernel launch).";
constexpr char kHeldHelp[] =
    "Device memory the process holds, all devices; for a process that did not answer, as last "
    "known (gpuwatch_process_known_age_seconds).";
constexpr char kKnownAgeHelp[] =
    "How old what is known of the process is: 0 when it answered this scrape; else the age of its "
    "earlier answer or of its last checkpoint.";

// Every family, in the order they are exposed.
constexpr Spec kSpecs[] = {
    {"gpuwatch_process_start_time_seconds", MetricType::Gauge,
     "Start time of the process under gpuwatch since the Unix epoch in seconds."},
    {"gpuwatch_process_state", MetricType::Gauge, kStateHelp},
    {"gpuwatch_process_idle_seconds", MetricType::Gauge, kIdleHelp},
    {"gpuwatch_process_device_memory_bytes", MetricType::Gauge, kHeldHelp},
    {"gpuwatch_process_known_age_seconds", MetricType::Gauge, kKnownAgeHelp},
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
    {"gpuwatch_cuda_call_in_progress_seconds", MetricType::Gauge,
     "Time spent so far in the CUDA call in progress that began first, per process (its "
     "status page); absent when the process is in none."},
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
    seen_.resize(families_.size());
  }

  // A series; none when the family already has one with the same labels.
  void Add(const char* name, std::vector<ClientMetric::Label> labels, double value) {
    auto it = std::find_if(families_.begin(), families_.end(),
                           [name](const MetricFamily& f) { return f.name == name; });
    if (it == families_.end()) return;
    std::string key;
    for (const ClientMetric::Label& l : labels) {
      key += l.name;
      key += '\0';
      key += l.value;
      key += '\0';
    }
    if (!seen_[static_cast<size_t>(it - families_.begin())].insert(std::move(key)).second) return;
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
  std::vector<std::set<std::string>> seen_;  // per family, its label sets
};

std::vector<ClientMetric::Label> With(std::vector<ClientMetric::Label> labels,
                                      const std::string& name, const std::string& value) {
  labels.push_back({name, value});
  return labels;
}

constexpr char kOtherSite[] = "other";

// The longest value of a container, unit or pod label, and of a device's
// UUID or PCI bus id (docs/prometheus.md, Cardinality).
constexpr size_t kMaxGroupLabelBytes = 128;
constexpr size_t kMaxDeviceLabelBytes = 64;

void AddSites(Builder& b, const LiveState& state, const std::vector<ClientMetric::Label>& labels,
              size_t top) {
  // Sites that read the same are one series (a label set may appear once);
  // one that reads "other" is counted in "other".
  std::vector<std::pair<std::string, double>> sites;
  std::map<std::string, size_t> index;
  double other = static_cast<double>(state.other_bytes);
  for (const LiveSite& s : state.sites) {
    const auto bytes = static_cast<double>(s.live_bytes);
    std::string label = SiteLabel(s);
    if (label == kOtherSite) {
      other += bytes;
      continue;
    }
    const auto [it, added] = index.emplace(std::move(label), sites.size());
    if (added) {
      sites.emplace_back(it->first, bytes);
    } else {
      sites[it->second].second += bytes;
    }
  }
  std::stable_sort(sites.begin(), sites.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  for (size_t i = top; i < sites.size(); ++i) other += sites[i].second;
  if (sites.size() > top) sites.resize(top);
  for (const auto& [site, bytes] : sites) {
    b.Add("gpuwatch_site_live_bytes", With(labels, "site", site), bytes);
  }
  b.Add("gpuwatch_site_live_bytes", With(labels, "site", kOtherSite), other);
}

// `labels` and name="value" when the value is not "" (the same to
// Prometheus as no label), cut to `max_bytes` (whole characters, escaped).
void AddIfSet(std::vector<ClientMetric::Label>* labels, const char* name, const std::string& value,
              size_t max_bytes) {
  if (!value.empty()) labels->push_back({name, Printable(value, max_bytes)});
}

std::vector<ClientMetric::Label> ProcessLabels(const LiveProcess& p) {
  std::vector<ClientMetric::Label> labels = {{"pid", std::to_string(p.pid)},
                                             {"command", CommandLabel(p.state.command)},
                                             {"rank", p.state.rank},
                                             {"host", p.state.host}};
  AddIfSet(&labels, "user", p.user, kMaxGroupLabelBytes);
  const LiveState::Cgroup& c = p.state.cgroup;
  AddIfSet(&labels, "container_id", c.container_id, kMaxGroupLabelBytes);
  AddIfSet(&labels, "systemd_unit", c.systemd_unit, kMaxGroupLabelBytes);
  AddIfSet(&labels, "pod_uid", c.pod_uid, kMaxGroupLabelBytes);
  AddIfSet(&labels, "namespace", c.pod_namespace, kMaxGroupLabelBytes);
  AddIfSet(&labels, "pod", c.pod_name, kMaxGroupLabelBytes);
  return labels;
}

// A device's labels: its ordinal in the process, and which physical GPU it
// is (dcgm-exporter's UUID, gpu and pci_bus_id) when the process said.
std::vector<ClientMetric::Label> DeviceLabels(std::vector<ClientMetric::Label> labels,
                                              const LiveDevice& d) {
  labels.push_back({"device", std::to_string(d.device)});
  AddIfSet(&labels, "UUID", d.uuid, kMaxDeviceLabelBytes);
  if (d.gpu.has_value()) labels.push_back({"gpu", std::to_string(*d.gpu)});
  AddIfSet(&labels, "pci_bus_id", d.pci_bus_id, kMaxDeviceLabelBytes);
  return labels;
}

// What the process is doing, and what it holds as far as is known: every
// process listed, answered or not.
void AddHolder(Builder& b, const LiveProcess& p, const LiveMetricsOptions& options) {
  const std::vector<ClientMetric::Label> labels = ProcessLabels(p);
  const HolderState s = HolderStateOf(p, options.idle_after_ns);
  const std::pair<const char*, bool> states[] = {{"running", !s.stopped && !s.idle},
                                                 {"idle", s.idle},
                                                 {"stopped", s.stopped},
                                                 {"orphaned", s.orphaned}};
  for (const auto& [state, in] : states) {
    b.Add("gpuwatch_process_state", With(labels, "state", state), in ? 1 : 0);
  }
  if (s.idle_ns.has_value()) {
    b.Add("gpuwatch_process_idle_seconds", labels, static_cast<double>(*s.idle_ns) / 1e9);
  }
  // The CUDA call it is in (its status page), answered or not.
  if (p.status.has_value()) {
    if (const StatusThreadView* t = LongestCall(*p.status); t != nullptr && t->call_start_ns != 0) {
      b.Add("gpuwatch_cuda_call_in_progress_seconds", With(labels, "call", Printable(t->call)),
            static_cast<double>(StatusSince(t->call_start_ns, p.status->now_ns)) / 1e9);
    }
  }
  if (!p.answered && p.known_from.empty()) return;  // nothing known of what it holds
  b.Add("gpuwatch_process_device_memory_bytes", labels, static_cast<double>(p.state.live_bytes));
  b.Add("gpuwatch_process_known_age_seconds", labels,
        p.answered ? 0.0 : static_cast<double>(p.known_age_ms) / 1000.0);
}

void AddProcess(Builder& b, const LiveProcess& p, const LiveMetricsOptions& options) {
  const LiveState& st = p.state;
  const std::vector<ClientMetric::Label> labels = ProcessLabels(p);
  const auto n = [](uint64_t v) { return static_cast<double>(v); };
  if (st.started_unix_ms.has_value()) {
    b.Add("gpuwatch_process_start_time_seconds", labels, n(*st.started_unix_ms) / 1000.0);
  }
  AddHolder(b, p, options);
  for (const LiveDevice& d : st.devices) {
    const std::vector<ClientMetric::Label> dl = DeviceLabels(labels, d);
    b.Add("gpuwatch_device_memory_live_bytes", dl, n(d.live_bytes));
    b.Add("gpuwatch_device_memory_peak_bytes", dl, n(d.peak_bytes));
    if (d.total_bytes.has_value())
      b.Add("gpuwatch_device_memory_total_bytes", dl, n(*d.total_bytes));
  }
  for (const LiveKind& k : st.kinds) {
    const std::vector<ClientMetric::Label> kl = With(labels, "kind", k.name);
    b.Add("gpuwatch_memory_live_bytes", kl, n(k.live_bytes));
    b.Add("gpuwatch_memory_peak_bytes", kl, n(k.peak_bytes));
    b.Add("gpuwatch_allocations_total", kl, n(k.allocs));
    b.Add("gpuwatch_allocated_bytes_total", kl, n(k.alloc_bytes));
    b.Add("gpuwatch_frees_total", kl, n(k.frees));
  }
  b.Add("gpuwatch_out_of_memory_total", labels, n(st.ooms));
  b.Add("gpuwatch_kernel_launches_total", labels, n(st.kernel_launches));
  b.Add("gpuwatch_unknown_frees_total", labels, n(st.unknown_frees));
  for (const LiveTransfer& t : st.transfers) {
    const std::vector<ClientMetric::Label> tl =
        With(With(labels, "direction", t.direction), "host_memory", t.host);
    b.Add("gpuwatch_transfers_total", tl, n(t.count));
    b.Add("gpuwatch_transfer_bytes_total", tl, n(t.bytes));
    b.Add("gpuwatch_timed_transfers_total", tl, n(t.timed_count));
    b.Add("gpuwatch_transfer_seconds_total", tl, n(t.duration_ns) / 1e9);
  }
  b.Add("gpuwatch_marks_total", labels, n(st.marks));
  AddSites(b, st, labels, options.top);
}

// The first `max_bytes` bytes of `s`, not cutting a UTF-8 character.
std::string Cut(const std::string& s, size_t max_bytes) {
  size_t n = std::min(max_bytes, s.size());
  while (n > 0 && n < s.size() && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n);
}

}  // namespace

std::string CommandLabel(const std::vector<std::string>& command, size_t max_bytes) {
  std::string text;
  for (std::string a : command) {
    if (text.empty()) {
      const size_t slash = a.find_last_of('/');
      if (slash != std::string::npos && slash + 1 < a.size()) a = a.substr(slash + 1);
      text = a;
    } else {
      text += " " + a;
    }
  }
  if (text.size() <= max_bytes) return text;
  const std::string dots = "...";
  return Cut(text, max_bytes > dots.size() ? max_bytes - dots.size() : 0) + dots;
}

std::string SiteLabel(const LiveSite& site) {
  std::string location = site.location;
  if (location.empty()) location = "(unknown)";
  std::string function = site.function;
  if (function.empty()) return location;
  // A template's name can run to kilobytes; a label is read by people.
  constexpr size_t kMaxFunction = 80;
  if (function.size() > kMaxFunction) function = Cut(function, kMaxFunction - 3) + "...";
  return location + " (" + function + ")";
}

std::vector<MetricFamily> LiveMetrics(const LiveScan& scan, const LiveMetricsOptions& options) {
  Builder b;
  for (const LiveProcess& p : scan.processes) AddProcess(b, p, options);
  for (const LiveProcess& p : scan.silent) AddHolder(b, p, options);
  b.Add("gpuwatch_exporter_processes", {}, static_cast<double>(scan.processes.size()));
  b.Add("gpuwatch_exporter_scrape_problems", {}, static_cast<double>(scan.problems.size()));
  return b.Take();
}

}  // namespace gpuwatch::tools
