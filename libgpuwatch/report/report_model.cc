#include "libgpuwatch/report/report_model.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <utility>

#include "libgpuwatch/symbolize/symbolizer.h"

namespace gpuwatch {

using nlohmann::json;
namespace key = report_key;

// The field tables: each struct's X-list of counts, in order.
GPUWATCH_COUNTS_OF(LeakSite, GPUWATCH_LEAK_SITE_COUNTS)
GPUWATCH_COUNTS_OF(PeakSite, GPUWATCH_PEAK_SITE_COUNTS)
GPUWATCH_COUNTS_OF(AllocSite, GPUWATCH_ALLOC_SITE_COUNTS)
GPUWATCH_COUNTS_OF(GrowthSite, GPUWATCH_GROWTH_SITE_COUNTS)
GPUWATCH_COUNTS_OF(OomSite, GPUWATCH_OOM_SITE_COUNTS)
GPUWATCH_COUNTS_OF(OomTorch, GPUWATCH_OOM_TORCH_COUNTS)
GPUWATCH_COUNTS_OF(LeakList, GPUWATCH_LEAK_LIST_COUNTS)
GPUWATCH_COUNTS_OF(KindRow, GPUWATCH_KIND_ROW_COUNTS)
GPUWATCH_COUNTS_OF(CopyRow, GPUWATCH_COPY_ROW_COUNTS)
GPUWATCH_COUNTS_OF(ReportTotals, GPUWATCH_TOTALS_COUNTS)
GPUWATCH_COUNTS_OF(ReportPeak, GPUWATCH_PEAK_COUNTS)
GPUWATCH_COUNTS_OF(MergedProcess, GPUWATCH_MERGED_PROCESS_COUNTS)

namespace {

// Writing.

json CountMapJson(const CountMap& map) {
  json out = json::object();
  for (const auto& [name, n] : map) out[name] = n;
  return out;
}

}  // namespace

json FrameJson(const ReportFrame& f) {
  json frame = {{key::kFunction, f.function},
                {key::kFile, f.file},
                {key::kLine, f.line},
                {key::kModule, f.module}};
  if (f.inlined) frame[key::kInlined] = true;
  return frame;
}

json SiteJson(const ReportSite& s) {
  json entry = {{key::kSite, s.site}, {key::kLocation, s.location}};
  if (s.category.has_value()) entry[key::kCategory] = *s.category;
  if (s.suppressed.has_value()) entry[key::kSuppressed] = *s.suppressed;
  if (s.processes != 0) entry[key::kProcesses] = s.processes;
  if (s.frames.empty()) {
    entry[key::kStack] = s.stack;
  } else {
    json frames = json::array();
    for (const ReportFrame& f : s.frames) frames.push_back(FrameJson(f));
    entry[key::kFrames] = std::move(frames);
  }
  return entry;
}

namespace {

template <typename T>
json SiteRow(const T& s, const std::function<void(const T&, json*)>& more) {
  json entry = SiteJson(s);
  PutCounts(s, T::Counts(), &entry);
  if (more) more(s, &entry);
  return entry;
}

template <typename T>
json SiteListJson(const std::vector<T>& sites, const std::function<void(const T&, json*)>& more) {
  json list = json::array();
  for (const T& s : sites) list.push_back(SiteRow(s, more));
  return list;
}

template <typename T>
json SiteListJson(const std::vector<T>& sites) {
  json list = json::array();
  for (const T& s : sites) list.push_back(SiteRowJson(s));
  return list;
}

json TotalsJson(const ReportTotals& t) {
  json out;
  PutCounts(t, ReportTotals::Counts(), &out);
  json kinds = json::object();
  for (const auto& [name, row] : t.kinds) PutCounts(row, KindRow::Counts(), &kinds[name]);
  out["kinds"] = std::move(kinds);
  json copies = json::object();
  for (const auto& [name, row] : t.copies) PutCounts(row, CopyRow::Counts(), &copies[name]);
  out["copies"] = std::move(copies);
  return out;
}

json MergedProcessJson(const MergedProcess& p) {
  json row = {{"file", p.file},
              {"host", p.host},
              {"rank", p.rank},
              {"command", p.command},
              {"trigger", p.trigger}};
  PutCounts(p, MergedProcess::Counts(), &row);
  return row;
}

}  // namespace

json SiteRowJson(const LeakSite& site) {
  return SiteRow<LeakSite>(site, [](const LeakSite& s, json* e) {
    (*e)["kinds"] = CountMapJson(s.kinds);
    if (!s.phase.empty()) (*e)["phase"] = s.phase;
    if (s.oldest_ns == kUnknownOldest) e->erase("oldest_ns");
  });
}

json SiteRowJson(const PeakSite& site) { return SiteRow<PeakSite>(site, nullptr); }

json SiteRowJson(const AllocSite& site) {
  return SiteRow<AllocSite>(site, [](const AllocSite& s, json* e) {
    if (!s.sizes.empty()) (*e)[key::kSizes] = s.sizes;
  });
}

json LeakListJson(const LeakList& l) {
  json section;
  PutCounts(l, LeakList::Counts(), &section);
  section[key::kSites] = SiteListJson(l.sites);
  l.split.WriteTo(&section);
  return section;
}

json LiveSinceJson(const LeakList& device, const LeakList& host, uint64_t window_peak_bytes) {
  return {{key::kDevice, LeakListJson(device)},
          {key::kHost, LeakListJson(host)},
          {"window_peak_bytes", window_peak_bytes}};
}

ReportFrame ReportFrameOf(const Frame& frame) {
  return {frame.function, frame.file, static_cast<uint64_t>(std::max(frame.line, 0)), frame.module,
          frame.inlined};
}

void ReportModel::ForEachSite(const std::function<void(ReportSite&)>& fn) {
  for (LeakSite& s : leaks_device.sites) fn(s);
  for (LeakSite& s : leaks_host.sites) fn(s);
  for (LeakSite& s : leaks_ipc_imported.sites) fn(s);
  for (PeakSite& s : peak.sites) fn(s);
  for (AllocSite& s : sites) fn(s);
  if (growth.has_value()) {
    for (GrowthSite& s : growth->suspects) fn(s);
  }
  if (oom.has_value()) fn(*oom);
  if (cuda_errors.has_value()) cuda_errors->ForEachSite(fn);
  if (regions.has_value()) regions->ForEachSite(fn);
  if (transfers.has_value()) {
    for (TransferSite& s : transfers->sites) fn(s);
  }
  if (timeline.has_value()) {
    for (TimelineSite& s : timeline->sites) fn(s);
  }
}

void ReportModel::BuildFrameTable() {
  std::unordered_map<std::string, uint32_t> index;  // a frame's fields -> its index
  ForEachSite([&](ReportSite& site) {
    site.stack.clear();
    for (ReportFrame& f : site.frames) {
      std::string k = f.function + '\0' + f.file + '\0' + std::to_string(f.line) + '\0' + f.module +
                      (f.inlined ? "\1" : "");
      const auto [at, added] = index.try_emplace(std::move(k), frame_table.size());
      if (added) frame_table.push_back(std::move(f));
      site.stack.push_back(at->second);
    }
    site.frames.clear();
  });
}

void ReportModel::InlineFrameTable() {
  ForEachSite([this](ReportSite& site) {
    if (site.stack.empty()) return;
    site.frames.clear();
    for (const uint32_t i : site.stack) {
      if (i < frame_table.size()) site.frames.push_back(frame_table[i]);
    }
    site.stack.clear();
  });
  frame_table.clear();
}

void ReportModel::ToJson(json* doc, bool trace_events, bool trace_sites) const {
  json& d = *doc;
  d[key::kSchema] = kReportSchemaName;
  d[key::kVersion] = kReportSchemaVersion;
  d[key::kTrigger] = trigger;
  d[key::kLabel] = label;
  d[key::kGpuwatch] = {{"version", gpuwatch_version}, {"attach", attach}, {"cupti", cupti}};
  if (!recording_stopped.empty()) {
    d[key::kGpuwatch]["recording_stopped"] = {{"why", recording_stopped},
                                              {"at_ns", recording_stopped_ns}};
  }
  d[key::kProcess] = {{"pid", process.pid},
                      {"host", process.host},
                      {"rank", process.rank},
                      {"command", process.command},
                      {"elapsed_ns", process.elapsed_ns}};
  if (!process.pytorch_allocator.empty()) {
    d[key::kProcess]["pytorch_allocator"] = process.pytorch_allocator;
  }
  d[key::kTotals] = TotalsJson(totals);
  d[key::kStackDepth] = stack_depth;
  if (unwind.has_value()) {
    d["tool_frames"] = unwind->tool_frames;
    d["unwinder"] = unwind->unwinder;
    d["unwind_fallbacks"] = unwind->unwind_fallbacks;
  }
  d[key::kLeaks] = {{key::kDevice, LeakListJson(leaks_device)},
                    {key::kHost, LeakListJson(leaks_host)},
                    {key::kIpcImported, LeakListJson(leaks_ipc_imported)}};
  json peak_json;
  PutCounts(peak, ReportPeak::Counts(), &peak_json);
  peak_json["kinds"] = CountMapJson(peak.kinds);
  peak_json[key::kSites] = SiteListJson(peak.sites);
  d[key::kPeak] = std::move(peak_json);
  d[key::kSites] = SiteListJson(sites);
  if (growth.has_value()) {
    d[key::kGrowth] = {{"basis", growth->basis},
                       {"samples", growth->samples},
                       {key::kSuspects, SiteListJson<GrowthSite>(growth->suspects,
                                                                 [](const GrowthSite& s, json* e) {
                                                                   (*e)["rate"] = s.rate;
                                                                   (*e)["unit"] = s.unit;
                                                                   (*e)["from"] = s.from;
                                                                   (*e)["to"] = s.to;
                                                                   if (!s.series.empty())
                                                                     (*e)["series"] = s.series;
                                                                   if (!s.phase.empty())
                                                                     (*e)["phase"] = s.phase;
                                                                 })}};
  }
  if (oom.has_value()) {
    json o = SiteJson(*oom);
    PutCounts(*oom, OomSite::Counts(), &o);
    o["kind"] = oom->kind;
    o["api"] = oom->api;
    o["error"] = oom->error;
    o["device"] = oom->device;
    if (oom->torch.has_value()) {
      json t = json::object();
      PutCounts(*oom->torch, OomTorch::Counts(), &t);
      o["torch"] = std::move(t);
    }
    d[key::kOom] = std::move(o);
  }
  if (cuda_errors.has_value()) {
    d[key::kCudaErrors] = CudaErrorsJson(*cuda_errors);
    // What is live in a failed run was live when it failed: not known to leak.
    if (cuda_errors->run_failed()) d[key::kLeaks][key::kLiveWhenFailed] = true;
  }
  if (phases.has_value()) d[key::kPhases] = PhasesJson(*phases);
  if (regions.has_value()) d[key::kRegions] = RegionsJson(*regions);
  if (torch_blocks.has_value()) d[key::kTorchBlocks] = TorchBlocksJson(*torch_blocks);
  if (transfers.has_value()) d[key::kTransfers] = TransfersJson(*transfers);
  if (kernels.has_value()) d[key::kKernels] = KernelsJson(*kernels);
  if (timeline.has_value()) d[key::kTimeline] = TimelineJson(*timeline);
  if (lifecycle.has_value()) d[key::kLifecycle] = LifecycleJson(*lifecycle);
  if (merged_from != 0) {
    d[key::kMergedFrom] = merged_from;
    json rows = json::array();
    for (const MergedProcess& p : processes) rows.push_back(MergedProcessJson(p));
    d[key::kProcesses] = std::move(rows);
  }
  json table = json::array();
  for (const ReportFrame& f : frame_table) table.push_back(FrameJson(f));
  d[key::kFrameTable] = std::move(table);
  if (trace.has_value()) d[key::kTrace] = ReportTraceJson(*trace, trace_events, trace_sites);
}

// Reading.

namespace {

// A site list of T: each element's common part, its counts, then `more`.
template <typename T>
std::vector<T> ReadSites(ReportFieldReader* r, const json& obj, const std::string& path,
                         const char* key,
                         const std::function<void(const json&, const std::string&, T*)>& more) {
  std::vector<T> out;
  const json* list = r->ArrayAt(obj, path, key);
  if (list == nullptr) return out;
  for (size_t i = 0; i < list->size() && !r->failed(); ++i) {
    const std::string at = ReportFieldReader::Element(ReportFieldReader::Join(path, key), i);
    T site;
    if (!r->Site((*list)[i], at, &site)) break;
    r->CountsAt((*list)[i], at, T::Counts(), &site);
    if (more) more((*list)[i], at, &site);
    out.push_back(std::move(site));
  }
  return out;
}

LeakList ReadLeakList(ReportFieldReader* r, const json& leaks, const char* which) {
  LeakList out;
  const json* s = r->ObjectAt(leaks, key::kLeaks, which);
  if (s == nullptr) return out;
  const std::string path = std::string(key::kLeaks) + "." + which;
  r->CountsAt(*s, path, LeakList::Counts(), &out);
  out.split.leaked_bytes = r->CountAt(*s, path, key::kLeakedBytes);
  out.split.leaked_count = r->CountAt(*s, path, key::kLeakedCount);
  out.split.suppressed_bytes = r->CountAt(*s, path, key::kSuppressedBytes);
  out.split.categorized_bytes = r->CountAt(*s, path, key::kCategorizedBytes);
  out.split.categories = r->CountMapAt(*s, path, key::kCategories);
  // The report gives leaked_count, not the suppressed and categorized counts
  // apart: their sum (what LeakSplitFigures::WriteTo needs) is the rest.
  out.split.suppressed_count = out.count - std::min(out.count, out.split.leaked_count);
  out.sites = ReadSites<LeakSite>(r, *s, path, key::kSites,
                                  [r](const json& j, const std::string& at, LeakSite* site) {
                                    site->kinds = r->CountMapAt(j, at, "kinds");
                                    site->phase = r->OptionalTextAt(j, at, "phase").value_or("");
                                    if (!j.contains("oldest_ns")) site->oldest_ns = kUnknownOldest;
                                  });
  return out;
}

ReportTotals ReadTotals(ReportFieldReader* r, const json& totals) {
  ReportTotals out;
  const std::string path = key::kTotals;
  r->CountsAt(totals, path, ReportTotals::Counts(), &out);
  const auto rows = [r, &path, &totals](const char* table_key, auto* table) {
    using Row = typename std::remove_pointer_t<decltype(table)>::mapped_type;
    const json* table_json = r->ObjectAt(totals, path, table_key);
    if (table_json == nullptr) return;
    for (const auto& [name, row] : table_json->items()) {
      const std::string at =
          ReportFieldReader::Join(ReportFieldReader::Join(path, table_key), name.c_str());
      if (!row.is_object()) {
        r->Expected(at, row, "an object");
        return;
      }
      r->CountsAt(row, at, Row::Counts(), &(*table)[name]);
    }
  };
  rows("kinds", &out.kinds);
  rows("copies", &out.copies);
  return out;
}

void ReadHeader(ReportFieldReader* r, const json& doc, ReportModel* m) {
  m->trigger = r->TextAt(doc, "", key::kTrigger);
  m->label = r->TextAt(doc, "", key::kLabel);
  if (const json* g = r->ObjectAt(doc, "", key::kGpuwatch)) {
    m->gpuwatch_version = r->TextAt(*g, key::kGpuwatch, "version");
    m->attach = r->TextAt(*g, key::kGpuwatch, "attach");
    m->cupti = r->TextAt(*g, key::kGpuwatch, "cupti");
    if (g->contains("recording_stopped")) {
      const std::string path = std::string(key::kGpuwatch) + ".recording_stopped";
      if (const json* stop = r->ObjectAt(*g, key::kGpuwatch, "recording_stopped")) {
        m->recording_stopped = r->TextAt(*stop, path, "why");
        m->recording_stopped_ns = r->CountAt(*stop, path, "at_ns");
      }
    }
  }
  if (const json* p = r->ObjectAt(doc, "", key::kProcess)) {
    const std::string path = key::kProcess;
    m->process.pid = r->CountAt(*p, path, "pid");
    m->process.elapsed_ns = r->CountAt(*p, path, "elapsed_ns");
    m->process.host = r->TextAt(*p, path, "host");
    m->process.rank = r->TextAt(*p, path, "rank");
    m->process.command = r->TextsAt(*p, path, "command");
    m->process.pytorch_allocator = r->TextAt(*p, path, "pytorch_allocator");
  }
  m->stack_depth = static_cast<int64_t>(r->CountAt(doc, "", key::kStackDepth));
  ReportUnwind u;
  u.tool_frames = r->CountAt(doc, "", "tool_frames");
  u.unwinder = r->TextAt(doc, "", "unwinder");
  u.unwind_fallbacks = r->CountAt(doc, "", "unwind_fallbacks");
  for (const char* k : {"tool_frames", "unwinder", "unwind_fallbacks"}) {
    if (ReportFieldReader::Member(doc, k) != nullptr) m->unwind = u;
  }
  m->merged_from = r->CountAt(doc, "", key::kMergedFrom);
  const json* rows = r->ArrayAt(doc, "", key::kProcesses);
  for (size_t i = 0; rows != nullptr && i < rows->size() && !r->failed(); ++i) {
    const json& p = (*rows)[i];
    const std::string at = ReportFieldReader::Element(key::kProcesses, i);
    if (!p.is_object()) {
      r->Expected(at, p, "an object");
      break;
    }
    MergedProcess row;
    r->CountsAt(p, at, MergedProcess::Counts(), &row);
    row.file = r->TextAt(p, at, "file");
    row.host = r->TextAt(p, at, "host");
    row.rank = r->TextAt(p, at, "rank");
    row.command = r->TextsAt(p, at, "command");
    row.trigger = r->TextAt(p, at, "trigger");
    m->processes.push_back(std::move(row));
  }
}

}  // namespace

bool ReadReportModel(const json& doc, ReportModel* out, std::string* error) {
  ReportFieldReader r;
  ReportModel m;
  if (const json* table = r.ArrayAt(doc, "", key::kFrameTable)) {
    m.frame_table = r.Frames(*table, key::kFrameTable);
    r.frame_table_size = table->size();
  }
  ReadHeader(&r, doc, &m);
  if (const json* totals = r.ObjectAt(doc, "", key::kTotals)) m.totals = ReadTotals(&r, *totals);
  if (const json* leaks = r.ObjectAt(doc, "", key::kLeaks)) {
    m.leaks_device = ReadLeakList(&r, *leaks, key::kDevice);
    m.leaks_host = ReadLeakList(&r, *leaks, key::kHost);
    m.leaks_ipc_imported = ReadLeakList(&r, *leaks, key::kIpcImported);  // older: absent
  }
  if (const json* peak = r.ObjectAt(doc, "", key::kPeak)) {
    r.CountsAt(*peak, key::kPeak, ReportPeak::Counts(), &m.peak);
    m.peak.kinds = r.CountMapAt(*peak, key::kPeak, "kinds");
    m.peak.sites = ReadSites<PeakSite>(&r, *peak, key::kPeak, key::kSites, nullptr);
  }
  m.sites = ReadSites<AllocSite>(
      &r, doc, "", key::kSites, [&r](const json& j, const std::string& at, AllocSite* s) {
        const json* sizes = r.ArrayAt(j, at, key::kSizes);  // absent in older reports
        for (size_t i = 0; sizes != nullptr && i < sizes->size() && !r.failed(); ++i) {
          s->sizes.push_back(
              r.Count((*sizes)[i],
                      ReportFieldReader::Element(ReportFieldReader::Join(at, key::kSizes), i)));
        }
      });
  if (const json* growth = r.ObjectAt(doc, "", key::kGrowth)) {
    ReportGrowth g;
    g.basis = r.TextAt(*growth, key::kGrowth, "basis");
    g.samples = r.CountAt(*growth, key::kGrowth, "samples");
    g.suspects = ReadSites<GrowthSite>(
        &r, *growth, key::kGrowth, key::kSuspects,
        [&r](const json& j, const std::string& at, GrowthSite* s) {
          s->rate = r.RealAt(j, at, "rate");
          s->from = r.RealAt(j, at, "from");
          s->to = r.RealAt(j, at, "to");
          s->unit = r.TextAt(j, at, "unit");
          s->phase = r.OptionalTextAt(j, at, "phase").value_or("");
          if (const json* series = r.ArrayAt(j, at, "series")) {
            for (size_t i = 0; i < series->size() && !r.failed(); ++i) {
              s->series.push_back(
                  r.Count((*series)[i],
                          ReportFieldReader::Element(ReportFieldReader::Join(at, "series"), i)));
            }
          }
        });
    m.growth = std::move(g);
  }
  if (const json* oom = r.ObjectAt(doc, "", key::kOom)) {
    OomSite o;
    if (r.Site(*oom, key::kOom, &o)) {
      r.CountsAt(*oom, key::kOom, OomSite::Counts(), &o);
      o.kind = r.TextAt(*oom, key::kOom, "kind");
      o.api = r.TextAt(*oom, key::kOom, "api");
      o.error = r.IntegerAt(*oom, key::kOom, "error");
      o.device = r.IntegerAt(*oom, key::kOom, "device");
      if (const json* t = r.ObjectAt(*oom, key::kOom, "torch")) {
        r.CountsAt(*t, ReportFieldReader::Join(key::kOom, "torch"), OomTorch::Counts(),
                   &o.torch.emplace());
      }
    }
    m.oom = std::move(o);
  }
  if (const json* phases = r.ObjectAt(doc, "", key::kPhases)) m.phases = ReadPhases(&r, *phases);
  if (const json* regions = r.ObjectAt(doc, "", key::kRegions)) {
    m.regions = ReadRegions(&r, *regions);
  }
  if (const json* t = r.ObjectAt(doc, "", key::kTorchBlocks)) {
    m.torch_blocks = ReadTorchBlocks(&r, *t);
  }
  if (const json* t = r.ObjectAt(doc, "", key::kTransfers)) m.transfers = ReadTransfers(&r, *t);
  if (const json* t = r.ObjectAt(doc, "", key::kTimeline)) m.timeline = ReadTimeline(&r, *t);
  if (const json* e = r.ObjectAt(doc, "", key::kCudaErrors)) {
    m.cuda_errors = ReadCudaErrors(&r, *e);
  }
  if (const json* k = r.ObjectAt(doc, "", key::kKernels)) m.kernels = ReadKernels(&r, *k);
  if (const json* l = r.ObjectAt(doc, "", key::kLifecycle)) m.lifecycle = ReadLifecycle(&r, *l);
  if (const json* trace = r.ObjectAt(doc, "", key::kTrace)) {
    ReadReportTrace(*trace, &m.trace.emplace(), &r);
  }
  if (r.failed()) {
    *error = r.problem();
    return false;
  }
  *out = std::move(m);
  return true;
}

}  // namespace gpuwatch
