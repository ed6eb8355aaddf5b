// `gpuwatch report`'s text sections: transfers and phases, from the typed
// model (report_text.h).
#include "tools/formats/report_text.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <string>
#include <vector>

#include "libgpuwatch/report/format.h"
#include "libgpuwatch/report/site_groups.h"
#include "libgpuwatch/symbolize/symbolizer.h"

namespace gpuwatch::tools {

// "function (file:line)", "function (module)" or "module".
std::string FrameText(const ReportFrame& f) {
  const std::string& function = f.function;
  std::string where;
  if (!f.file.empty() && f.line != 0) {
    where = std::string(Basename(f.file)) + ":" + std::to_string(f.line);
  } else {
    where = std::string(Basename(f.module));
  }
  if (function.empty()) return where.empty() ? "??" : where;
  return where.empty() ? function : function + " (" + where + ")";
}

// libc's frames below main: never worth a line.
bool IsStartupFrame(const ReportFrame& f) {
  const std::string& function = f.function;
  return function.rfind("__libc_start", 0) == 0 || function == "_start";
}

void PrintSiteRows(const std::vector<SiteRow>& rows, bool counted,
                   const std::function<void(size_t)>& after, Printer* p) {
  std::vector<std::string> keys;
  std::vector<uint64_t> bytes;
  keys.reserve(rows.size());
  bytes.reserve(rows.size());
  for (const SiteRow& r : rows) {
    keys.push_back(Describe(*r.site));
    bytes.push_back(r.bytes);
  }
  const auto count_text = [counted](uint64_t n) { return counted ? std::to_string(n) : ""; };
  const std::vector<SiteGroup> groups = GroupByLocation(keys, bytes);
  for (size_t g = 0; g < groups.size() && g < p->top(); ++g) {
    const std::vector<size_t>& members = groups[g].members;
    const SiteRow& first = rows[members.front()];
    if (members.size() == 1) {
      p->Site(FormatBytes(first.bytes), count_text(first.count), *first.site, first.tag);
      if (after) after(members.front());
      continue;
    }
    uint64_t count = 0;
    for (const size_t m : members) count += rows[m].count;
    p->Line("  " + Printer::Pad(FormatBytes(groups[g].bytes), 10) + "  " +
            Printer::Pad(count_text(count), 7) + "  " +
            (first.tag.empty() ? "" : "[" + first.tag + "] ") + keys[members.front()] + ", " +
            CountOf(members.size(), "call path", "call paths") + ":");
    const auto frame = [&rows](size_t row, size_t index) {
      const std::vector<ReportFrame>& frames = rows[row].site->frames;
      return index < frames.size() ? FrameText(frames[index]) : std::string();
    };
    const size_t split = FirstDifference(members, frame);
    for (size_t k = 0; k < members.size() && k < kCallPathsShown; ++k) {
      const SiteRow& r = rows[members[k]];
      const std::string via = frame(members[k], split);
      p->Line("    " + Printer::Pad(FormatBytes(r.bytes), 10) + "  " +
              Printer::Pad(count_text(r.count), 7) + "    <- " + (via.empty() ? "?" : via));
      if (after) after(members[k]);
    }
    if (members.size() > kCallPathsShown) {
      p->Line(std::string(27, ' ') + MoreCallPaths(members.size() - kCallPathsShown));
    }
  }
  if (groups.size() > p->top()) {
    p->Line("  ... and " + CountOf(groups.size() - p->top(), "more location", "more locations") +
            " (--top to show more)");
  }
}

void PrintLeakRows(const std::vector<const LeakSite*>& sites, const std::vector<std::string>& tags,
                   const std::function<void(const LeakSite&)>& after, Printer* p) {
  std::vector<SiteRow> rows;
  rows.reserve(sites.size());
  for (size_t i = 0; i < sites.size(); ++i) {
    rows.push_back({sites[i], sites[i]->bytes, sites[i]->count, i < tags.size() ? tags[i] : ""});
  }
  std::function<void(size_t)> each;
  if (after) each = [&](size_t i) { after(*sites[i]); };
  PrintSiteRows(rows, true, each, p);
}

namespace {

std::string Seconds(uint64_t ns) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3f s", static_cast<double>(ns) / 1e9);
  return text;
}

std::string CodeText(const std::string& name, int64_t code) {
  return name.empty() ? "error " + std::to_string(code) : name + " (" + std::to_string(code) + ")";
}

// A merged report's sticky error: "pid 4242, rank 1, ".
std::string ProcessOf(const StickyErrorSite& s) {
  if (!s.pid.has_value()) return "";
  return "pid " + std::to_string(*s.pid) + (s.rank.empty() ? "" : ", rank " + s.rank) + ", ";
}

}  // namespace

void PrintCudaErrors(const ReportModel& m, Printer* p) {
  if (!m.cuda_errors.has_value()) return;
  const ReportCudaErrors& e = *m.cuda_errors;
  for (const StickyErrorSite& s : e.sticky) {
    p->Blank();
    p->Line("The run failed: CUDA error " + CodeText(s.name, s.code) + " in " + s.api + " at " +
            Describe(s) + ", " + Seconds(s.time_ns) + " after attach (" + ProcessOf(s) + "device " +
            std::to_string(s.device) + "; sticky: every later call on the context fails)");
    const std::vector<ReportFrame>& frames = s.frames;
    for (size_t i = 1, shown = 0; i < frames.size() && shown < 2; ++i) {
      if (IsStartupFrame(frames[i])) break;
      p->Line("    <- " + FrameText(frames[i]));
      ++shown;
    }
    if (s.kernels.empty()) {
      p->Line("  No kernel was launched on the context since its last successful synchronization.");
      continue;
    }
    p->Line(
        "  Kernels launched since the last successful synchronization, oldest first"
        " (before the error, stream, launched at):");
    if (s.omitted_kernels != 0) {
      p->Line("  (" + CountOf(s.omitted_kernels, "older launch", "older launches") + " not kept)");
    }
    for (const KernelBeforeErrorSite& k : s.kernels) {
      char before[32];
      std::snprintf(before, sizeof(before), "%.3f ms", static_cast<double>(k.before_ns) / 1e6);
      char stream[32];
      std::snprintf(stream, sizeof(stream), "0x%" PRIx64, k.stream);
      p->Line("  " + Printer::Pad(before, 10) + "  " + Printer::Pad(stream, 14) + "  " + k.kernel +
              " at " + Describe(k));
    }
  }
  if (e.calls.empty()) return;
  p->Blank();
  p->Line("CUDA calls that failed (call, error, count, first at):");
  for (size_t i = 0; i < e.calls.size() && i < p->top(); ++i) {
    const ErrorCallSite& c = e.calls[i];
    p->Line("  " + c.api + "  " + CodeText(c.name, c.code) + "  x" + std::to_string(c.count) +
            "  " + Describe(c));
  }
  p->More(std::min(e.calls.size(), p->top()), e.calls.size(), "calls");
}

void PrintTransfers(const ReportModel& m, Printer* p) {
  p->Blank();
  if (!m.transfers.has_value()) {
    // Reports without a transfers section: the copy counts from the totals.
    if (m.totals.copies.empty()) {
      p->Line("Transfers: none.");
      return;
    }
    std::string line = "Transfers:";
    for (const auto& [direction, c] : m.totals.copies) {
      line += " " + direction + " " + CountOf(c.count, "copy", "copies") + " (" +
              FormatBytes(c.bytes) + ")";
    }
    p->Line(line);
    return;
  }
  const ReportTransfers& transfers = *m.transfers;
  p->Line("Transfers:");
  // Per direction, over the host memory kinds.
  struct Direction {
    std::string name;
    uint64_t count = 0;
    uint64_t bytes = 0;
    uint64_t duration_ns = 0;
    uint64_t timed_bytes = 0;
    std::string hosts;
  };
  std::vector<Direction> directions;
  for (const TransferTotal& t : transfers.totals) {
    auto it = std::find_if(directions.begin(), directions.end(),
                           [&](const Direction& d) { return d.name == t.direction; });
    if (it == directions.end()) {
      directions.emplace_back();
      directions.back().name = t.direction;
      it = directions.end() - 1;
    }
    it->count += t.count;
    it->bytes += t.bytes;
    it->duration_ns += t.duration_ns;
    if (t.duration_ns != 0) it->timed_bytes += t.bytes;
    if (!t.host.empty() && t.host != "device" && t.host != "unknown") {
      it->hosts += (it->hosts.empty() ? "" : ", ") + t.host + " " + std::to_string(t.count);
    }
  }
  for (const Direction& d : directions) {
    std::string line =
        "  " + Printer::Pad(d.name, 7) + "  " + Printer::Pad(std::to_string(d.count), 7) +
        (d.count == 1 ? " copy    " : " copies  ") + Printer::Pad(FormatBytes(d.bytes), 10);
    if (d.duration_ns != 0) {
      char buf[48];
      std::snprintf(buf, sizeof(buf), "  %.1f GB/s",
                    static_cast<double>(d.timed_bytes) / static_cast<double>(d.duration_ns));
      line += buf;
    } else {
      line += "  not timed";
    }
    if (!d.hosts.empty()) line += "  (" + d.hosts + ")";
    p->Line(line);
  }
  if (transfers.unmatched_records != 0) {
    p->Line("  " + CountOf(transfers.unmatched_records, "activity record", "activity records") +
            " joined no call (each copy is counted once, from its call; those calls are untimed)");
  }
  const std::vector<TransferSite>& sites = transfers.sites;
  if (!sites.empty()) {
    p->Line("  by site:");
    for (size_t i = 0; i < sites.size() && i < p->top(); ++i) {
      p->Site(FormatBytes(sites[i].all.bytes), std::to_string(sites[i].all.count), sites[i]);
    }
    p->More(std::min(sites.size(), p->top()), sites.size(), "sites");
  }
  if (!transfers.findings.empty()) {
    p->Line("  findings:");
    for (size_t i = 0; i < transfers.findings.size() && i < p->top(); ++i) {
      const TransferFindingRow& f = transfers.findings[i];
      p->Line("  - " + f.message);
      if (!f.advice.empty()) p->Line("    " + f.advice);
    }
  }
}

void PrintPhases(const ReportModel& m, Printer* p) {
  if (!m.phases.has_value() || m.phases->paths.empty()) return;
  const std::vector<PhasePath>& paths = m.phases->paths;
  p->Blank();
  if (m.trigger == "merge") {
    p->Line("Memory by phase (peak: the highest of any one process, device memory while open,");
    p->Line("nested phases included; allocated, live and copied: in the phase itself, summed):");
  } else {
    p->Line("Memory by phase (peak: device memory while open, nested phases included; allocated,");
    p->Line("live and copied: in the phase itself):");
  }
  p->Line("        peak   allocated  allocs        live      copied  phase");
  const size_t shown = std::min(paths.size(), 3 * p->top());
  for (size_t i = 0; i < shown; ++i) {
    const PhasePath& e = paths[i];
    uint64_t copied = 0;
    for (const auto& [direction, c] : e.copies) copied += c.bytes;
    const std::string& path = e.path;
    const uint64_t depth = std::max<uint64_t>(e.depth, 1);
    const size_t slash = path.rfind('/');
    std::string line = "  " + Printer::Pad(FormatBytes(e.peak_bytes), 10) + "  " +
                       Printer::Pad(FormatBytes(e.alloc_bytes), 10) + "  " +
                       Printer::Pad(std::to_string(e.allocs), 6) + "  " +
                       Printer::Pad(FormatBytes(e.live_bytes), 10) + "  " +
                       Printer::Pad(FormatBytes(copied), 10) + "  " +
                       std::string(2 * (depth - 1), ' ') +
                       (slash == std::string::npos ? path : path.substr(slash + 1));
    std::string peak;
    if (e.peak_site.has_value()) peak = "peak at " + e.peak_site->location;
    if (const std::string process = PhasePeakProcess(e); !process.empty()) {
      peak += std::string(peak.empty() ? "peak" : "") + " in " + process;
    }
    if (e.peak_top_site.has_value()) {
      peak += std::string(peak.empty() ? "" : "; ") + "most held by " + e.peak_top_site->location +
              ", " + FormatBytes(e.peak_top_site->bytes);
    }
    if (!peak.empty()) line += "  (" + peak + ")";
    p->Line(line);
  }
  p->More(shown, paths.size(), "phases");
  static constexpr CounterNote<ReportPhases> kNotes[] = {
      {&ReportPhases::unbalanced_pops, nullptr, "pop", "pops", " with no range open"},
      {&ReportPhases::open_at_thread_exit, nullptr, "range", "ranges",
       " left open when a thread ended"},
      {&ReportPhases::unmatched_ends, nullptr, "range end", "range ends",
       " of no open start/end range"},
      {&ReportPhases::ranges_not_tracked, nullptr, "start/end range", "start/end ranges",
       " past 64 open at once, not tracked"},
      {&ReportPhases::too_deep, nullptr, "range", "ranges",
       " nested too deep (counted in the one above)"},
      {&ReportPhases::names_dropped, &ReportPhases::paths_dropped, "range", "ranges",
       " past the limits, under \"(other)\""},
  };
  for (const std::string& note : CounterNotes<ReportPhases>(*m.phases, kNotes)) {
    p->Line("  " + note);
  }
}

}  // namespace gpuwatch::tools
