// `gpuwatch report FILE`: renders a report for a person (text), for a flame
// graph (collapsed stacks), or as validated JSON.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "libgpuwatch/report/format.h"
#include "libgpuwatch/symbolize/symbolizer.h"
#include "tools/commands.h"
#include "tools/commands/report_progress.h"
#include "tools/formats/html_format.h"
#include "tools/formats/perfetto_format.h"
#include "tools/formats/pprof_format.h"
#include "tools/formats/report_text.h"
#include "tools/reading/report_reader.h"

namespace gpuwatch::tools {

namespace {

std::string Seconds(uint64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f s", static_cast<double>(ns) / 1e9);
  return buf;
}

void PrintHeader(const Report& r, Printer* p) {
  const ReportModel& m = r.model;
  if (m.trigger == "merge") {
    p->Line("gpuwatch report " + r.path + ": merged from " + std::to_string(m.processes.size()) +
            " processes");
    return;
  }
  std::string who = "process " + std::to_string(m.process.pid);
  if (!m.process.host.empty()) who += " on " + m.process.host;
  if (!m.process.rank.empty()) who += ", rank " + m.process.rank;
  p->Line("gpuwatch report " + r.path + ": " + who + ": " + CommandLine(r.model.process));
  if (m.trigger == "checkpoint") {
    p->Line("  " + CheckpointTaken(r));
    return;
  }
  std::string when = "  written at " + m.trigger;
  if (!m.label.empty()) when += " \"" + m.label + "\"";
  when += " after " + Seconds(m.process.elapsed_ns);
  p->Line(when);
}

void PrintProcesses(const ReportModel& m, Printer* p) {
  if (m.processes.empty()) return;
  p->Blank();
  p->Line("Processes:");
  p->Line("  " + Printer::Pad("pid", 8) + "  " + Printer::Pad("rank", 5) + "  " +
          Printer::Pad("peak", 10) + "  " + Printer::Pad("leaked", 10) + "  file");
  for (const MergedProcess& proc : m.processes) {
    p->Line("  " + Printer::Pad(std::to_string(proc.pid), 8) + "  " +
            Printer::Pad(proc.rank.empty() ? "-" : proc.rank, 5) + "  " +
            Printer::Pad(FormatBytes(proc.device_peak_bytes), 10) + "  " +
            Printer::Pad(FormatBytes(proc.leaked_bytes), 10) + "  " + proc.file);
  }
}

void PrintTotals(const ReportModel& m, Printer* p) {
  const ReportTotals& totals = m.totals;
  const bool at_exit = m.trigger == "exit" || m.trigger == "merge";
  const KindSums device = SumKinds(totals, /*host=*/false);
  const KindSums host = SumKinds(totals, /*host=*/true);
  p->Blank();
  p->Line("Device memory: peak " + FormatBytes(totals.device_peak_bytes) + "; live " +
          (at_exit ? "at exit " : "now ") + FormatBytes(totals.device_current_bytes) + " in " +
          CountOf(totals.device_live_count, "allocation", "allocations"));
  p->Line("  " + CountOf(device.allocs, "allocation", "allocations") + " (" +
          FormatBytes(device.alloc_bytes) + "), " + CountOf(device.frees, "free", "frees") + ", " +
          CountOf(totals.kernel_launches, "kernel launch", "kernel launches") + ", " +
          CountOf(totals.unknown_frees, "free", "frees") + " of unknown pointers");
  if (host.allocs != 0 || totals.host_current_bytes != 0) {
    p->Line("Pinned host memory: live " + FormatBytes(totals.host_current_bytes) + " in " +
            CountOf(totals.host_live_count, "allocation", "allocations"));
    p->Line("  " + CountOf(host.allocs, "allocation", "allocations") + " (" +
            FormatBytes(host.alloc_bytes) + "), " + CountOf(host.frees, "free", "frees"));
  }
}

// Pool regions still registered (the `regions` section), by the site of
// the allocation that holds them: {count, bytes}.
using HeldRegions = std::map<uint64_t, std::pair<uint64_t, uint64_t>>;
HeldRegions RegionsBySegmentSite(const ReportModel& m) {
  HeldRegions held;
  if (!m.regions.has_value()) return held;
  for (const RegionSegment& s : m.regions->segments) {
    auto& [count, bytes] = held[s.site];
    count += s.region_count;
    bytes += s.region_bytes;
  }
  return held;
}

void PrintHeld(const ReportSite& site, const HeldRegions& held, Printer* p) {
  const auto it = held.find(site.site);
  if (it == held.end()) return;
  p->Line(std::string(25, ' ') + "holds " + FormatBytes(it->second.second) + " in " +
          CountOf(it->second.first, "pool region", "pool regions") +
          " still registered (Pool regions, below)");
}

// `failed`: the run ended on a CUDA error, so what is live was live when it
// failed, not known to leak.
// Prints a leaks section, adding what its suppressions took to `uses`.
void PrintLeakSection(const LeakList& section, const char* what, bool at_exit, bool failed,
                      const HeldRegions& held, std::vector<SuppressionUse>* uses, Printer* p) {
  const LeakSplit split = SplitLeaks(section, nullptr, false);
  const auto print_held = [&held, p](const LeakSite& site) { PrintHeld(site, held, p); };
  p->Blank();
  const std::string title = failed    ? std::string("Live when the run failed, ") + what
                            : at_exit ? std::string("Leaked ") + what
                                      : std::string("Live ") + what;
  if (split.leaked_bytes == 0) {
    p->Line(failed ? std::string("No ") + what + " live when the run failed."
                   : std::string(at_exit ? "No " : "No live ") + what +
                         (at_exit ? " leaked." : " outside categories and suppressions."));
  } else {
    p->Line(title + ": " + FormatBytes(split.leaked_bytes) + " in " +
            CountOf(split.leaked_count, "allocation", "allocations") + " from " +
            CountOf(split.leaked.size(), "site", "sites"));
    std::vector<std::string> phases;
    for (const LeakSite* site : split.leaked) {
      phases.push_back(site->phase.empty() ? "" : "in " + site->phase);
    }
    PrintLeakRows(split.leaked, phases, print_held, p);
    if (split.omitted_bytes != 0) {
      p->Line("  (" + FormatBytes(split.omitted_bytes) + " more in sites the report omitted)");
    }
  }
  if (!split.categorized.empty()) {
    p->Line("Kept by libraries on purpose (not counted as leaked): " +
            FormatBytes(split.categorized_bytes));
    PrintLeakRows(split.categorized, split.category_of, print_held, p);
  }
  if (!split.suppressed.empty()) {
    p->Line("Suppressed: " + FormatBytes(split.suppressed_bytes));
    PrintLeakRows(split.suppressed, split.suppressed_by, nullptr, p);
    for (size_t i = 0; i < split.suppressed.size(); ++i) {
      AddSuppressionUse(uses, split.suppressed_by[i], split.suppressed[i]->count,
                        split.suppressed[i]->bytes);
    }
  }
}

// Another process's memory opened through CUDA IPC and not closed: not this
// process's leak, shown apart.
void PrintImported(const LeakList& section, bool at_exit, Printer* p) {
  if (section.bytes == 0) return;
  p->Blank();
  p->Line(std::string(at_exit ? "Open at exit" : "Open") +
          ", another process's memory (CUDA IPC; not a leak of this process): " +
          FormatBytes(section.bytes) + " in " + CountOf(section.count, "mapping", "mappings") +
          " from " + CountOf(section.sites.size(), "site", "sites"));
  for (size_t i = 0; i < section.sites.size() && i < p->top(); ++i) {
    const LeakSite& site = section.sites[i];
    p->Site(FormatBytes(site.bytes), std::to_string(site.count), site);
  }
  p->More(std::min(section.sites.size(), p->top()), section.sites.size(), "sites");
}

std::string RateText(const GrowthSite& g) {
  return "+" + FormatRate(g.rate, g.unit, RateStyle::kCompact);
}

std::string WindowText(const GrowthSite& g) {
  return FormatBytes(g.first_bytes) + " -> " + FormatBytes(g.last_bytes) + ", " + GrowthWindow(g);
}

void PrintGrowth(const ReportModel& m, Printer* p) {
  if (!m.growth.has_value()) return;
  p->Blank();
  const std::string& basis = m.growth->basis;
  const uint64_t samples = m.growth->samples;
  if (basis == "none" || basis.empty()) {
    p->Line(
        "Growth: no samples (no gpuwatch_mark() calls, and the run was shorter than one "
        "sampling interval).");
    return;
  }
  const std::string over = basis == "mark" ? std::to_string(samples) + " marks"
                                           : std::to_string(samples) + " samples over time";
  std::vector<const GrowthSite*> counted;
  std::vector<std::pair<const GrowthSite*, std::string>> apart;
  for (const GrowthSite& g : m.growth->suspects) {
    std::string tag = SuppressionOfSite(g, SuppressionKind::kGrowth, nullptr);
    if (tag.empty()) tag = CategoryOfSite(g);
    if (tag.empty()) {
      counted.push_back(&g);
    } else {
      apart.emplace_back(&g, tag);
    }
  }
  if (counted.empty()) {
    p->Line("No growth suspects (" + over + ").");
  } else {
    p->Line("Growth suspects (" + over + "): sites whose live memory keeps rising");
    for (size_t i = 0; i < counted.size() && i < p->top(); ++i) {
      const GrowthSite& g = *counted[i];
      p->Site(RateText(g), "", g, g.phase.empty() ? "" : "in " + g.phase);
      p->Line(std::string(25, ' ') + WindowText(g));
    }
    p->More(std::min(counted.size(), p->top()), counted.size(), "suspects");
  }
  for (size_t i = 0; i < apart.size() && i < p->top(); ++i) {
    if (i == 0) p->Line("Growth kept by libraries or suppressed:");
    p->Site(RateText(*apart[i].first), "", *apart[i].first, apart[i].second);
  }
}

void PrintPeak(const ReportPeak& peak, Printer* p) {
  const std::vector<PeakSite>& sites = peak.sites;
  p->Blank();
  p->Line("Peak: " + FormatBytes(peak.device_bytes) + " of device memory" +
          (!sites.empty() ? "; live at the peak, by site:" : "."));
  std::vector<SiteRow> rows;
  rows.reserve(sites.size());
  for (const PeakSite& s : sites) rows.push_back({&s, s.bytes, 0, ""});
  PrintSiteRows(rows, false, nullptr, p);
}

// Pool regions still registered through NVTX's memory extension: each site
// that registered them, where its user called from, and the allocation that
// holds them.
void PrintRegions(const ReportModel& m, bool at_exit, Printer* p) {
  if (!m.regions.has_value()) return;
  const ReportRegions& regions = *m.regions;
  p->Blank();
  if (regions.live_count == 0) {
    p->Line(std::string("Pool regions (NVTX memory extension): none ") +
            (at_exit ? "left registered." : "registered now."));
  } else {
    p->Line(std::string("Pool regions ") + (at_exit ? "left registered" : "registered now") +
            " (NVTX memory extension): " + FormatBytes(regions.live_bytes) + " in " +
            CountOf(regions.live_count, "region", "regions"));
  }
  const std::vector<RegionSite>& sites = regions.sites;
  for (size_t i = 0; i < sites.size() && i < p->top(); ++i) {
    const RegionSite& e = sites[i];
    p->Site(FormatBytes(e.bytes), std::to_string(e.count), e,
            e.phase.empty() ? "" : "in " + e.phase);
    std::string where;
    if (e.segment.has_value()) where = "inside the allocation at " + e.segment->location;
    if (e.outside_count != 0) {
      if (!where.empty()) where += "; ";
      where += CountOf(e.outside_count, "region", "regions") +
               " in no live allocation (freed under it, or not device memory)";
    }
    if (!where.empty()) p->Line(std::string(25, ' ') + where);
  }
  p->More(std::min(sites.size(), p->top()), sites.size(), "sites");
  using Counters = ReportRegionCounters;
  const Counters& c = regions.counters;
  static constexpr CounterNote<Counters> kNotes[] = {
      {&Counters::released_by_reset, nullptr, "region", "regions", " ended by a heap reset"},
      {&Counters::unknown_unregisters, nullptr, "unregistration", "unregistrations",
       " of no registered region"},
      {&Counters::replaced, nullptr, "region", "regions", " registered over a live one"},
      {&Counters::dropped, &Counters::heaps_dropped, "registration", "registrations",
       " not recorded (tables full)"},
  };
  std::vector<std::string> notes = CounterNotes<Counters>(c, kNotes);
  notes.push_back(CountOf(c.registered, "region", "regions") + " registered in " +
                  CountOf(c.heaps_registered, "heap", "heaps") + ", " +
                  std::to_string(c.unregistered) + " unregistered");
  for (const std::string& note : notes) p->Line("  " + note);
}

// Sites by bytes allocated, device and pinned host memory apart (a site's
// host_alloc_bytes say how much of what it allocated was host memory).
void PrintAllocations(const std::vector<AllocSite>& sites, Printer* p) {
  if (sites.empty()) return;
  for (const bool host : {false, true}) {
    std::vector<SiteRow> rows;
    for (const AllocSite& site : sites) {
      const uint64_t all_bytes = site.alloc_bytes;
      const uint64_t all_count = site.allocs;
      const uint64_t host_bytes = std::min(site.host_alloc_bytes, all_bytes);
      const uint64_t host_count = std::min(site.host_allocs, all_count);
      const uint64_t bytes = host ? host_bytes : all_bytes - host_bytes;
      const uint64_t count = host ? host_count : all_count - host_count;
      if (count != 0) rows.push_back({&site, bytes, count, ""});
    }
    if (rows.empty()) continue;
    std::stable_sort(rows.begin(), rows.end(),
                     [](const SiteRow& a, const SiteRow& b) { return a.bytes > b.bytes; });
    p->Blank();
    p->Line(std::string(host ? "Pinned host" : "Device") +
            " allocation sites, by bytes allocated (allocated, allocations):");
    PrintSiteRows(rows, true, nullptr, p);
  }
}

void PrintOom(const ReportModel& m, Printer* p) {
  if (!m.oom.has_value()) return;
  const OomSite& oom = *m.oom;
  p->Blank();
  p->Line("Out of memory: " + oom.api + " of " + FormatBytes(oom.size) + " failed at " +
          Describe(oom) + " (device free " + FormatBytes(oom.device_free_bytes) + " of " +
          FormatBytes(oom.device_total_bytes) + ")");
  if (oom.torch.has_value()) {
    const OomTorch& t = *oom.torch;
    p->Line("  PyTorch when it raised OutOfMemoryError: " + FormatBytes(t.allocated_bytes) +
            " allocated, " + FormatBytes(t.reserved_bytes) +
            " reserved (after emptying its cache)");
  }
  if (oom.graph_pool_idle_bytes != 0) {
    p->Line("  graph memory the driver kept for reuse, held by no graph: " +
            FormatBytes(oom.graph_pool_idle_bytes) +
            " (cudaDeviceGraphMemTrim returns it to the device)");
  }
}

std::string Millis(uint64_t ns) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f ms", static_cast<double>(ns) / 1e6);
  return text;
}

// The lifecycle's figures a reader acts on (the cold start, contexts made
// again and again) and its findings; nothing when it has none.
void PrintLifecycle(const ReportModel& m, Printer* p) {
  if (!m.lifecycle.has_value()) return;
  const ReportLifecycle& l = *m.lifecycle;
  std::string figures;
  if (l.init_latency_ns.has_value()) {
    figures += "CUDA init " + Millis(*l.init_latency_ns);
  }
  if (l.cold_start_ns.has_value()) {
    figures += std::string(figures.empty() ? "" : "; ") + "first kernel " +
               Millis(*l.cold_start_ns) + " after the first CUDA call (cold start)";
  }
  if (l.contexts.created != 0 || l.contexts.destroyed != 0) {
    figures += std::string(figures.empty() ? "" : "; ") +
               CountOf(l.contexts.created, "context", "contexts") + " created, " +
               std::to_string(l.contexts.destroyed) + " destroyed";
  }
  if (figures.empty() && l.findings.empty()) return;
  p->Blank();
  p->Line("Lifecycle: " + figures);
  for (const LifecycleFinding& f : l.findings) {
    if (const std::string text = FindingText(f); !text.empty()) p->Line("  finding: " + text);
  }
}

int Text(const Report& r, int top, FILE* out) {
  Printer p(out, top);
  const ReportModel& m = r.model;
  const std::string& trigger = m.trigger;
  const bool at_exit = trigger == "exit" || trigger == "merge" || trigger == "context_destroy";
  const bool failed = m.cuda_errors.has_value() && m.cuda_errors->run_failed();
  PrintHeader(r, &p);
  PrintProcesses(m, &p);
  PrintCudaErrors(m, &p);  // a run that failed leads with its error
  PrintOom(m, &p);
  PrintTotals(m, &p);
  const HeldRegions held = RegionsBySegmentSite(m);
  std::vector<SuppressionUse> uses;
  PrintLeakSection(m.leaks_device, "device memory", at_exit, failed, held, &uses, &p);
  if (m.leaks_host.bytes != 0) {
    PrintLeakSection(m.leaks_host, "pinned host memory", at_exit, failed, held, &uses, &p);
  }
  if (!uses.empty()) {  // as LeakSanitizer ends its report
    p.Blank();
    const std::string table = SuppressionsUsedTable(std::move(uses), "");
    for (size_t at = 0, end; (end = table.find('\n', at)) != std::string::npos; at = end + 1) {
      p.Line(table.substr(at, end - at));
    }
  }
  PrintTorchBlocks(m, &p);
  PrintImported(m.leaks_ipc_imported, at_exit, &p);
  PrintRegions(m, at_exit, &p);
  PrintGrowth(m, &p);
  PrintPeak(m.peak, &p);
  PrintPhases(r.model, &p);
  PrintTransfers(r.model, &p);
  PrintLifecycle(m, &p);
  PrintAllocations(m.sites, &p);
  return 0;
}

// Flame graph input (Brendan Gregg's collapsed format): one line per site,
// the frames outermost first separated by ';', then a space and the bytes.
int Collapsed(const Report& r, const std::string& what, FILE* out) {
  const auto line = [out](const ReportSite& site, uint64_t value) {
    std::string stack;
    for (size_t i = site.frames.size(); i-- > 0;) {
      const ReportFrame& f = site.frames[i];
      std::string name = f.function;
      if (name.empty()) name = std::string(Basename(f.module));
      if (name.empty()) name = "??";
      std::replace(name.begin(), name.end(), ';', ':');
      if (!stack.empty()) stack += ';';
      stack += name;
    }
    if (site.frames.empty()) stack = site.location;
    std::fprintf(out, "%s %" PRIu64 "\n", stack.c_str(), value);
  };
  const ReportModel& m = r.model;
  if (what == "leaks") {
    for (const LeakSite& s : m.leaks_device.sites) line(s, s.bytes);
  } else if (what == "peak") {
    for (const PeakSite& s : m.peak.sites) line(s, s.bytes);
  } else {
    for (const AllocSite& s : m.sites) line(s, s.alloc_bytes);
  }
  return 0;
}

void Write(std::string_view text, FILE* out) { std::fwrite(text.data(), 1, text.size(), out); }

// `--format json`: the document as json::dump(2) prints it, with the trace,
// whose events are printed from their structs a megabyte at a time (a
// million of them are not made a document again). Each placeholder is found
// where only it can be: a key at its depth, after a newline (a string's own
// newlines are escaped).
void WriteJson(const json& doc, const ReportTrace* trace, FILE* out) {
  if (trace == nullptr) {
    Write(doc.dump(2) + "\n", out);
    return;
  }
  const std::string placeholder = json("\x01").dump();  // "\u0001"
  json shown = doc;
  shown[report_key::kTrace] = "\x01";
  const std::string text = shown.dump(2);
  const std::string trace_at = "\n  \"trace\": " + placeholder;
  const size_t at = text.find(trace_at);
  json section = ReportTraceJson(*trace, /*with_events=*/false);
  section[report_key::kEvents] = "\x01";
  std::string inner = section.dump(2);
  for (size_t i = inner.find('\n'); i != std::string::npos; i = inner.find('\n', i + 1)) {
    inner.insert(i + 1, "  ");  // one level deeper
  }
  const std::string events_at = "\n    \"events\": " + placeholder;
  const size_t events = inner.find(events_at);
  Write(std::string_view(text).substr(0, at + trace_at.size() - placeholder.size()), out);
  Write(std::string_view(inner).substr(0, events + events_at.size() - placeholder.size()), out);
  if (trace->events.empty()) {
    Write("[]", out);
  } else {
    const TraceEventText writer(*trace);
    std::string lines;
    for (size_t i = 0; i < trace->events.size(); ++i) {
      writer.Append(trace->events[i], i == 0 ? "[\n      [\n        " : ",\n      [\n        ",
                    ",\n        ", "\n      ]", &lines);
      if (lines.size() >= (size_t{1} << 20)) {
        Write(lines, out);
        lines.clear();
      }
    }
    Write(lines + "\n    ]", out);
  }
  Write(std::string_view(inner).substr(events + events_at.size()), out);
  Write(std::string_view(text).substr(at + trace_at.size()), out);
  Write("\n", out);
}

int Render(const Report& r, const ReportOptions& options, FILE* out) {
  const ReportTrace* trace = r.model.trace.has_value() ? &*r.model.trace : nullptr;
  if (options.format == "json") {
    json doc = ReportDocument(r.model);
    doc.erase(report_key::kTrace);
    WriteJson(doc, trace, out);
    return 0;
  }
  if (options.format == "collapsed") return Collapsed(r, options.what, out);
  if (options.format == "perfetto") {
    WritePerfettoTrace(r, out);
    return 0;
  }
  if (options.format == "html") {
    const std::string page = HtmlReport(r);
    std::fwrite(page.data(), 1, page.size(), out);
    return 0;
  }
  if (options.format == "pprof") {
    std::string gz;
    if (!Gzip(PprofProfile(r.model), &gz)) {
      std::fprintf(stderr, "gpuwatch report: cannot compress the pprof profile\n");
      return 2;
    }
    std::fwrite(gz.data(), 1, gz.size(), out);
    return 0;
  }
  return Text(r, options.top, out);
}

}  // namespace

int ReportCommand(const ReportOptions& options, FILE* out) {
  Report r;
  std::string error;
  const bool with_trace =
      options.format == "json" || options.format == "perfetto" || options.format == "html";
  ReportProgress progress(options.file);  // a large file on a terminal: a line while it works
  if (!ReadReport(options.file, &r, &error,
                  with_trace ? TraceSection::kKeep : TraceSection::kSkip)) {
    progress.Erase();
    std::fprintf(stderr, "gpuwatch report: %s\n", error.c_str());
    return 2;
  }
  const bool out_is_terminal = options.output.empty() && isatty(fileno(out)) != 0;
  progress.Rendering(options.format, out_is_terminal);
  if (options.format == "pprof" && out_is_terminal) {
    progress.Erase();
    std::fprintf(stderr,
                 "gpuwatch report: --format pprof is binary; write it to a file with -o FILE\n");
    return 2;
  }
  if (options.output.empty()) return Render(r, options, out);
  // Opened only once the input is known good, so a bad input leaves it as it was.
  FILE* file = std::fopen(options.output.c_str(), "w");
  if (file == nullptr) {
    progress.Erase();
    std::fprintf(stderr, "gpuwatch report: cannot write %s: %s\n", options.output.c_str(),
                 std::strerror(errno));
    return 2;
  }
  const int status = Render(r, options, file);
  const bool write_failed = std::ferror(file) != 0;
  const int write_errno = errno;
  if (std::fclose(file) != 0 || write_failed) {
    std::fprintf(stderr, "gpuwatch report: cannot write %s: %s\n", options.output.c_str(),
                 std::strerror(write_failed ? write_errno : errno));
    return 2;
  }
  return status;
}

}  // namespace gpuwatch::tools
