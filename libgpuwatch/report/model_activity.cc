// The transfers, kernels, timeline and lifecycle sections: their field
// tables, JSON writers and readers (model_activity.h).
#include "libgpuwatch/report/model_activity.h"

#include <cstdio>
#include <string>
#include <utility>

#include "libgpuwatch/report/format.h"

namespace gpuwatch {

using nlohmann::json;
namespace key = report_key;

GPUWATCH_COUNTS_OF(TransferFigures, GPUWATCH_TRANSFER_COUNTS)
GPUWATCH_COUNTS_OF(TransferSite, GPUWATCH_TRANSFER_SITE_COUNTS)
GPUWATCH_COUNTS_OF(TransferFindingRow, GPUWATCH_TRANSFER_FINDING_COUNTS)
GPUWATCH_COUNTS_OF(AllocChurn, GPUWATCH_ALLOC_CHURN_COUNTS)
GPUWATCH_COUNTS_OF(ReportTransfers, GPUWATCH_TRANSFERS_COUNTS)
GPUWATCH_COUNTS_OF(KernelRow, GPUWATCH_KERNEL_COUNTS)
GPUWATCH_COUNTS_OF(ReportKernels, GPUWATCH_KERNELS_COUNTS)
GPUWATCH_COUNTS_OF(BlockedRow, GPUWATCH_BLOCKED_COUNTS)
GPUWATCH_COUNTS_OF(ContextFigures, GPUWATCH_CONTEXT_COUNTS)
GPUWATCH_COUNTS_OF(ReportLifecycle, GPUWATCH_LIFECYCLE_COUNTS)
GPUWATCH_COUNTS_OF(LifecycleFinding, GPUWATCH_LIFECYCLE_FINDING_COUNTS)

namespace {

constexpr char kTotalNs[] = "total_ns";  // lifecycle.blocked's sum

// Writing.

void PutFigures(const TransferFigures& f, json* out) {
  json& o = *out;
  o[key::kCount] = f.count;
  o[key::kBytes] = f.bytes;
  if (f.timed_count != 0) {
    o["timed_count"] = f.timed_count;
    o["duration_ns"] = f.duration_ns;
  }
  if (f.gbps.has_value()) o["gbps"] = *f.gbps;
}

json FiguresMapJson(const std::map<std::string, TransferFigures, std::less<>>& map) {
  json out = json::object();
  for (const auto& [name, f] : map) PutFigures(f, &out[name]);
  return out;
}

json SamplesJson(const TimelineSeries& series) {
  json list = json::array();
  for (const TimelineSample& s : series.samples) {
    json entry = {{"time_ns", s.time_ns}, {"device_bytes", s.device_bytes}};
    if (s.mark != 0) {
      entry["mark"] = s.mark;
      entry["label"] = s.label;
    }
    list.push_back(std::move(entry));
  }
  return {{"total", series.total}, {"samples", std::move(list)}};
}

// Reading.

bool BoolAt(ReportFieldReader* r, const json& obj, const std::string& path, const char* k) {
  const json* v = ReportFieldReader::Member(obj, k);
  if (v == nullptr || r->failed()) return false;
  if (!v->is_boolean()) {
    r->Expected(ReportFieldReader::Join(path, k), *v, "true or false");
    return false;
  }
  return v->get<bool>();
}

std::optional<double> OptionalRealAt(ReportFieldReader* r, const json& obj, const std::string& path,
                                     const char* k) {
  if (ReportFieldReader::Member(obj, k) == nullptr) return std::nullopt;
  return r->RealAt(obj, path, k);
}

// The counts of an array `k` of `obj`.
std::vector<uint64_t> CountList(ReportFieldReader* r, const json& obj, const std::string& path,
                                const char* k) {
  std::vector<uint64_t> out;
  const json* list = r->ArrayAt(obj, path, k);
  for (size_t i = 0; list != nullptr && i < list->size() && !r->failed(); ++i) {
    out.push_back(
        r->Count((*list)[i], ReportFieldReader::Element(ReportFieldReader::Join(path, k), i)));
  }
  return out;
}

// The members of the object `k` of `obj` but `except`, each an object read
// by `each(member, its path, the entry of `out`)`.
template <typename Row, typename Each>
void ObjectMap(ReportFieldReader* r, const json& obj, const std::string& path, const char* k,
               std::map<std::string, Row, std::less<>>* out, const Each& each,
               const char* except = nullptr) {
  const json* map = r->ObjectAt(obj, path, k);
  if (map == nullptr) return;
  for (const auto& [name, row] : map->items()) {
    if (r->failed() || (except != nullptr && name == except)) continue;
    const std::string at = ReportFieldReader::Join(ReportFieldReader::Join(path, k), name.c_str());
    if (!row.is_object()) {
      r->Expected(at, row, "an object");
      return;
    }
    each(row, at, &(*out)[name]);
  }
}

void ReadFigures(ReportFieldReader* r, const json& obj, const std::string& path,
                 TransferFigures* out) {
  r->CountsAt(obj, path, TransferFigures::Counts(), out);
  out->gbps = OptionalRealAt(r, obj, path, "gbps");
}

void ReadFiguresMap(ReportFieldReader* r, const json& obj, const std::string& path, const char* k,
                    std::map<std::string, TransferFigures, std::less<>>* out) {
  ObjectMap(r, obj, path, k, out, [r](const json& row, const std::string& at, TransferFigures* f) {
    ReadFigures(r, row, at, f);
  });
}

TimelineSeries ReadSeries(ReportFieldReader* r, const json& timeline, const char* which) {
  TimelineSeries out;
  const json* series = r->ObjectAt(timeline, key::kTimeline, which);
  if (series == nullptr) return out;
  const std::string path = ReportFieldReader::Join(key::kTimeline, which);
  out.total = r->CountAt(*series, path, "total");
  r->Objects(*series, path, "samples", [r, &out](const json& e, const std::string& at) {
    TimelineSample& s = out.samples.emplace_back();
    s.time_ns = r->CountAt(e, at, "time_ns");
    s.device_bytes = r->CountAt(e, at, "device_bytes");
    s.mark = r->CountAt(e, at, "mark");
    s.label = r->TextAt(e, at, "label");
  });
  return out;
}

}  // namespace

json TransfersJson(const ReportTransfers& t) {
  json totals = json::array();
  for (const TransferTotal& row : t.totals) {
    json entry;
    PutFigures(row, &entry);
    entry["direction"] = row.direction;
    entry["host"] = row.host;
    totals.push_back(std::move(entry));
  }
  json sites = json::array();
  for (const TransferSite& s : t.sites) {
    json entry = SiteJson(s);
    PutFigures(s.all, &entry);
    PutCounts(s, TransferSite::Counts(), &entry);
    entry["directions"] = FiguresMapJson(s.directions);
    entry["hosts"] = FiguresMapJson(s.hosts);
    json histogram = json::array();
    for (const TransferBucket& b : s.histogram) {
      histogram.push_back({{"min_bytes", b.min_bytes}, {key::kCount, b.count}});
    }
    entry["histogram"] = std::move(histogram);
    sites.push_back(std::move(entry));
  }
  json findings = json::array();
  for (const TransferFindingRow& f : t.findings) {
    json entry = {{"type", f.type},
                  {key::kSite, f.site},
                  {key::kLocation, f.location},
                  {"message", f.message},
                  {"advice", f.advice}};
    PutCounts(f, TransferFindingRow::Counts(), &entry);
    if (!f.direction.empty()) entry["direction"] = f.direction;
    if (f.gbps.has_value()) entry["gbps"] = *f.gbps;
    if (f.best_gbps.has_value()) entry["best_gbps"] = *f.best_gbps;
    findings.push_back(std::move(entry));
  }
  json out = {{"totals", std::move(totals)},
              {key::kSites, std::move(sites)},
              {"findings", std::move(findings)}};
  if (t.process_figures) {
    json best = json::object();
    for (const auto& [direction, gbps] : t.best_gbps) best[direction] = gbps;
    out["best_gbps"] = std::move(best);
    PutCounts(t, ReportTransfers::Counts(), &out);
  }
  return out;
}

json KernelsJson(const ReportKernels& k) {
  json list = json::array();
  for (const KernelRow& row : k.kernels) {
    json entry = {{"name", row.name}, {"mangled", row.mangled}, {"launches", row.launches}};
    if (row.timed != 0) {
      entry["timed"] = row.timed;
      entry["gpu_ns"] = row.gpu_ns;
    }
    list.push_back(std::move(entry));
  }
  json out = {{"timing", k.timing}, {"kernels", std::move(list)}};
  PutCounts(k, ReportKernels::Counts(), &out);
  return out;
}

json TimelineJson(const ReportTimeline& t) {
  json sites = json::array();
  for (const TimelineSite& s : t.sites) {
    json entry = SiteJson(s);
    entry["max_bytes"] = s.max_bytes;
    entry["marks"] = s.marks;
    entry["periodic"] = s.periodic;
    sites.push_back(std::move(entry));
  }
  return {{"capacity", t.capacity},
          {"interval_ms", t.interval_ms},
          {"marks", SamplesJson(t.marks)},
          {"periodic", SamplesJson(t.periodic)},
          {key::kSites, std::move(sites)}};
}

std::string ContextChurnText(uint64_t created, uint64_t destroyed) {
  return CountOf(created, "context", "contexts") + " created and " + std::to_string(destroyed) +
         " destroyed while the process ran: a context per request or job? Each one repeats "
         "CUDA's initialization and frees its memory with it; keep one context (or a pool) for "
         "the process's life";
}

std::string AllocChurnText(const AllocChurn& c) {
  char ms[32];
  std::snprintf(ms, sizeof(ms), "%.1f ms", static_cast<double>(c.call_ns) / 1e6);
  return CountOf(c.count, "allocation", "allocations") + " at " + c.location +
         " freed and made again (" + CountOf(c.cycles, "cycle", "cycles") +
         " of allocate-and-free): " + ms +
         " in those allocation and free calls; allocate once and reuse the buffer (or use "
         "cudaMallocAsync's pool)";
}

std::string FindingText(const LifecycleFinding& f) {
  if (f.churn.has_value()) return AllocChurnText(*f.churn);
  if (f.type == "context_churn") return ContextChurnText(f.contexts_created, f.contexts_destroyed);
  return "";
}

json LifecycleJson(const ReportLifecycle& l) {
  json blocked = json::object();
  for (const auto& [kind, row] : l.blocked) PutCounts(row, BlockedRow::Counts(), &blocked[kind]);
  blocked[kTotalNs] = l.blocked_total_ns;
  json out = {{"first_call_observed", l.first_call_observed}, {"blocked", std::move(blocked)}};
  PutCounts(l, ReportLifecycle::Counts(), &out);
  out["init_latency_ns"] = l.init_latency_ns.has_value() ? json(*l.init_latency_ns) : json();
  out["cold_start_ns"] = l.cold_start_ns.has_value() ? json(*l.cold_start_ns) : json();
  out["teardown_ns"] = l.teardown_ns.has_value() ? json(*l.teardown_ns) : json();
  out["exit_status"] = l.exit_status.has_value() ? json(*l.exit_status) : json();
  PutCounts(l.contexts, ContextFigures::Counts(), &out["contexts"]);
  json findings = json::array();
  for (const LifecycleFinding& f : l.findings) {
    json e = {{"type", f.type}};
    if (f.churn.has_value()) {
      PutCounts(*f.churn, AllocChurn::Counts(), &e);
      e["location"] = f.churn->location;
    } else {
      PutCounts(f, LifecycleFinding::Counts(), &e);
    }
    findings.push_back(std::move(e));
  }
  out["findings"] = std::move(findings);
  return out;
}

ReportTransfers ReadTransfers(ReportFieldReader* r, const json& section) {
  ReportTransfers out;
  const std::string path = key::kTransfers;
  r->Objects(section, path, "totals", [r, &out](const json& e, const std::string& at) {
    TransferTotal& t = out.totals.emplace_back();
    t.direction = r->TextAt(e, at, "direction");
    t.host = r->TextAt(e, at, "host");
    ReadFigures(r, e, at, &t);
  });
  r->Objects(section, path, key::kSites, [r, &out](const json& e, const std::string& at) {
    TransferSite& s = out.sites.emplace_back();
    if (!r->Site(e, at, &s)) return;
    ReadFigures(r, e, at, &s.all);
    r->CountsAt(e, at, TransferSite::Counts(), &s);
    ReadFiguresMap(r, e, at, "directions", &s.directions);
    ReadFiguresMap(r, e, at, "hosts", &s.hosts);
    r->Objects(e, at, "histogram", [r, &s](const json& b, const std::string& b_at) {
      s.histogram.push_back({r->CountAt(b, b_at, "min_bytes"), r->CountAt(b, b_at, key::kCount)});
    });
  });
  r->Objects(section, path, "findings", [r, &out](const json& e, const std::string& at) {
    TransferFindingRow& f = out.findings.emplace_back();
    f.type = r->TextAt(e, at, "type");
    f.site = r->CountAt(e, at, key::kSite);
    f.location = r->TextAt(e, at, key::kLocation);
    f.message = r->TextAt(e, at, "message");
    f.advice = r->TextAt(e, at, "advice");
    r->CountsAt(e, at, TransferFindingRow::Counts(), &f);
    f.direction = r->TextAt(e, at, "direction");
    f.gbps = OptionalRealAt(r, e, at, "gbps");
    f.best_gbps = OptionalRealAt(r, e, at, "best_gbps");
  });
  if (const json* best = r->ObjectAt(section, path, "best_gbps")) {
    const std::string at = ReportFieldReader::Join(path, "best_gbps");
    for (const auto& [direction, gbps] : best->items()) {
      out.best_gbps[direction] = r->RealAt(*best, at, direction.c_str());
    }
  }
  r->CountsAt(section, path, ReportTransfers::Counts(), &out);
  out.process_figures = false;
  for (const char* k : {"best_gbps", "unmatched_records", "pending_dropped"}) {
    if (ReportFieldReader::Member(section, k) != nullptr) out.process_figures = true;
  }
  return out;
}

ReportKernels ReadKernels(ReportFieldReader* r, const json& section) {
  ReportKernels out;
  const std::string path = key::kKernels;
  r->CountsAt(section, path, ReportKernels::Counts(), &out);
  out.timing = BoolAt(r, section, path, "timing");
  r->Objects(section, path, "kernels", [r, &out](const json& e, const std::string& at) {
    KernelRow& k = out.kernels.emplace_back();
    k.name = r->TextAt(e, at, "name");
    k.mangled = r->TextAt(e, at, "mangled");
    r->CountsAt(e, at, KernelRow::Counts(), &k);
  });
  return out;
}

ReportTimeline ReadTimeline(ReportFieldReader* r, const json& section) {
  ReportTimeline out;
  const std::string path = key::kTimeline;
  r->Objects(section, path, key::kSites, [r, &out](const json& e, const std::string& at) {
    TimelineSite& s = out.sites.emplace_back();
    if (!r->Site(e, at, &s)) return;
    s.max_bytes = r->CountAt(e, at, "max_bytes");
    s.marks = CountList(r, e, at, "marks");
    s.periodic = CountList(r, e, at, "periodic");
  });
  out.capacity = r->CountAt(section, path, "capacity");
  out.interval_ms = r->CountAt(section, path, "interval_ms");
  out.marks = ReadSeries(r, section, "marks");
  out.periodic = ReadSeries(r, section, "periodic");
  return out;
}

ReportLifecycle ReadLifecycle(ReportFieldReader* r, const json& section) {
  ReportLifecycle out;
  const std::string path = key::kLifecycle;
  r->CountsAt(section, path, ReportLifecycle::Counts(), &out);
  ObjectMap(
      r, section, path, "blocked", &out.blocked,
      [r](const json& row, const std::string& at, BlockedRow* b) {
        r->CountsAt(row, at, BlockedRow::Counts(), b);
      },
      kTotalNs);
  if (const json* blocked = r->ObjectAt(section, path, "blocked")) {
    out.blocked_total_ns = r->CountAt(*blocked, ReportFieldReader::Join(path, "blocked"), kTotalNs);
  }
  if (ReportFieldReader::Member(section, "init_latency_ns") != nullptr) {
    out.init_latency_ns = r->CountAt(section, path, "init_latency_ns");
  }
  if (ReportFieldReader::Member(section, "cold_start_ns") != nullptr) {
    out.cold_start_ns = r->CountAt(section, path, "cold_start_ns");
  }
  if (ReportFieldReader::Member(section, "teardown_ns") != nullptr) {
    out.teardown_ns = r->CountAt(section, path, "teardown_ns");
  }
  if (ReportFieldReader::Member(section, "exit_status") != nullptr) {
    out.exit_status = r->IntegerAt(section, path, "exit_status");
  }
  out.first_call_observed = BoolAt(r, section, path, "first_call_observed");
  if (const json* contexts = r->ObjectAt(section, path, "contexts")) {
    r->CountsAt(*contexts, ReportFieldReader::Join(path, "contexts"), ContextFigures::Counts(),
                &out.contexts);
  }
  r->Objects(section, path, "findings", [r, &out](const json& e, const std::string& at) {
    LifecycleFinding& f = out.findings.emplace_back();
    f.type = r->TextAt(e, at, "type");
    if (f.type == kAllocChurnType) {
      AllocChurn& c = f.churn.emplace();
      r->CountsAt(e, at, AllocChurn::Counts(), &c);
      c.location = r->TextAt(e, at, "location");
    } else {
      r->CountsAt(e, at, LifecycleFinding::Counts(), &f);
    }
  });
  return out;
}

}  // namespace gpuwatch
