// `gpuwatch check FILE`: a CI gate. Exit 0 when the report is within every
// limit, 1 when a rule is broken (each broken rule is printed with its sites
// and figures), 2 when an input cannot be read or an argument is wrong.
//
// Rules:
// - exit report: broken by a checkpoint (what a process killed with SIGKILL,
//   or still running, leaves): nothing is known of its end, and the leak
//   rule is then not judged (what was live then is not known to leak).
// - leak: device memory live at exit, outside suppressions and (unless
//   --include-categories) outside the built-in categories, at most --max-leak
//   (default 0).
// - peak: the device high watermark at most --max-peak (when given).
// - phase peak (--max-phase-peak NAME=BYTES, repeatable): the device memory
//   while phase NAME was open (its "peak_bytes" in the phases section) at most
//   BYTES, for every path that is NAME or ends in "/NAME". A NAME the report
//   has no phase of breaks the rule (a misspelt phase must not pass).
// - cuda error: the run ended on no sticky CUDA error (a kernel's fault).
//   Checked only when the report has one, which always breaks it; the leak
//   rule is then not judged (what was live when the run failed is not known
//   to leak).
// - growth (--max-growth): with --baseline, the device peak and the leaked
//   bytes may exceed the baseline's by at most the limit; without it, each
//   growth suspect of the report may grow by at most the limit (a percentage
//   is then taken of the site's bytes at the start of its growth window).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "libgpuwatch/analysis/suppressions.h"
#include "libgpuwatch/report/format.h"
#include "tools/commands.h"
#include "tools/reading/report_reader.h"

namespace gpuwatch::tools {

namespace {

struct GrowthLimit {
  bool set = false;
  bool percent = false;
  double pct = 0;
  uint64_t bytes = 0;

  uint64_t Allowance(uint64_t base) const {
    if (!percent) return bytes;
    const double allowed = std::floor(static_cast<double>(base) * pct / 100.0);
    return allowed < 18446744073709551616.0 ? static_cast<uint64_t>(allowed) : UINT64_MAX;
  }
  std::string Text() const {
    if (!percent) return "+" + FormatBytes(bytes);
    char buf[32];
    std::snprintf(buf, sizeof(buf), "+%g%%", pct);
    return buf;
  }
};

bool ParseGrowthLimit(const std::string& text, GrowthLimit* out) {
  out->set = true;
  if (!text.empty() && text.back() == '%') {
    const std::string number = text.substr(0, text.size() - 1);
    char* end = nullptr;
    const double pct = std::strtod(number.c_str(), &end);
    if (number.empty() || end == nullptr || *end != '\0' || !(pct >= 0) || pct > 1e9) {
      return false;
    }
    out->percent = true;
    out->pct = pct;
    return true;
  }
  // A bare number is refused: `--max-growth 10` meant 10% as often as 10 bytes.
  const bool has_unit = !text.empty() && std::isalpha(static_cast<unsigned char>(text.back()));
  return has_unit && ParseBytes(text, &out->bytes);
}

struct Rule {
  std::string name;
  bool broken = false;
  std::string summary;             // figures and limit
  std::vector<std::string> sites;  // the sites behind a broken rule
};

std::string SiteLine(const ReportSite& site, const std::string& figures) {
  return figures + " at " + Describe(site);
}

// Sites of `now_sites` whose bytes grew over `base_sites`, matched by stack,
// largest growth first. T: a site with `bytes` (leaks, peak).
template <typename T>
std::vector<std::string> GrownSites(const std::vector<const T*>& base_sites,
                                    const std::vector<const T*>& now_sites, size_t top) {
  std::map<std::string, uint64_t> base;
  for (const T* s : base_sites) base[SiteKey(*s)] += s->bytes;
  std::vector<std::pair<uint64_t, const T*>> grown;
  for (const T* s : now_sites) {
    const uint64_t before = base[SiteKey(*s)];
    if (s->bytes > before) grown.emplace_back(s->bytes - before, s);
  }
  std::stable_sort(grown.begin(), grown.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> lines;
  for (size_t i = 0; i < grown.size() && i < top; ++i) {
    const uint64_t after = grown[i].second->bytes;
    lines.push_back(SiteLine(*grown[i].second, SignedBytes(static_cast<int64_t>(grown[i].first)) +
                                                   " (" + FormatBytes(after - grown[i].first) +
                                                   " -> " + FormatBytes(after) + ")"));
  }
  return lines;
}

template <typename T>
std::vector<const T*> Pointers(const std::vector<T>& sites) {
  std::vector<const T*> out;
  out.reserve(sites.size());
  for (const T& s : sites) out.push_back(&s);
  return out;
}

// Broken by the sticky errors of a run that failed: each, with the call
// where it surfaced and the kernels launched before it since the last
// successful synchronization.
Rule CudaErrorRule(const ReportCudaErrors& errors, size_t top) {
  Rule rule;
  rule.name = "cuda error";
  rule.broken = true;
  const StickyErrorSite& first = errors.sticky.front();
  const std::string code =
      (first.name.empty() ? "error" : first.name) + " (" + std::to_string(first.code) + ")";
  rule.summary = "the run failed: CUDA error " + code + " surfaced in " + first.api + " at " +
                 Describe(first) + "; every later call on its context fails";
  for (const StickyErrorSite& s : errors.sticky) {
    if (&s != &first) {
      rule.sites.push_back("also " + s.name + " in " + s.api + " at " + Describe(s));
    }
    const size_t n = s.kernels.size();
    for (size_t i = 0; i < n && i < top; ++i) {
      const KernelBeforeErrorSite& k = s.kernels[n - 1 - i];  // newest first
      rule.sites.push_back(SiteLine(k, "kernel " + k.kernel +
                                           " launched since the last "
                                           "successful synchronization"));
    }
    if (n > top) rule.sites.push_back("... and " + std::to_string(n - top) + " more kernels");
  }
  return rule;
}

Rule LeakRule(const LeakSplit& split, uint64_t limit, size_t top) {
  Rule rule;
  rule.name = "leak";
  rule.broken = split.leaked_bytes > limit;
  if (split.leaked_bytes == 0) {
    rule.summary = "no device memory leaked (limit " + FormatBytes(limit) + ")";
    return rule;
  }
  rule.summary = FormatBytes(split.leaked_bytes) + " of device memory leaked in " +
                 CountOf(split.leaked_count, "allocation", "allocations") + " from " +
                 CountOf(split.leaked.size(), "site", "sites") + " (limit " + FormatBytes(limit) +
                 ")";
  if (rule.broken) {
    for (size_t i = 0; i < split.leaked.size() && i < top; ++i) {
      const LeakSite& site = *split.leaked[i];
      rule.sites.push_back(
          SiteLine(site, FormatBytes(site.bytes) + " in " + std::to_string(site.count)));
    }
    if (split.leaked.size() > top) {
      rule.sites.push_back("... and " + std::to_string(split.leaked.size() - top) + " more sites");
    }
  }
  return rule;
}

// Growth suspects of one report against the limit.
Rule SuspectRule(const ReportModel& m, const GrowthLimit& limit, const Suppressions* extra,
                 bool include_categories, std::vector<std::string>* notes) {
  Rule rule;
  rule.name = "growth";
  const ReportGrowth growth = m.growth.value_or(ReportGrowth{});
  size_t counted = 0;
  {
    for (const GrowthSite& g : growth.suspects) {
      const std::string suppressed = SuppressionOfSite(g, SuppressionKind::kGrowth, extra);
      const std::string category = CategoryOfSite(g);
      if (!suppressed.empty()) {
        notes->push_back("growth at " + Describe(g) + " suppressed by " + suppressed);
        continue;
      }
      if (!category.empty() && !include_categories) {
        notes->push_back("growth at " + Describe(g) + " kept by " + category +
                         ", not counted (--include-categories counts it)");
        continue;
      }
      ++counted;
      const uint64_t first = g.first_bytes;
      const uint64_t grown = g.growth_bytes;
      if (grown <= limit.Allowance(first) && !(limit.percent && first == 0 && grown > 0)) continue;
      rule.broken = true;
      rule.sites.push_back(SiteLine(g, "grows by " + FormatRate(g.rate, g.unit, RateStyle::kProse) +
                                           ": " + FormatBytes(first) + " -> " +
                                           FormatBytes(g.last_bytes) + " over " + GrowthWindow(g) +
                                           " (" + SignedBytes(grown) + ")"));
    }
  }
  const std::string& basis = growth.basis;
  rule.summary = std::to_string(counted) + " growth " + (counted == 1 ? "suspect" : "suspects") +
                 (basis == "mark"     ? " across " + std::to_string(growth.samples) + " marks"
                  : basis == "second" ? " over time"
                                      : "") +
                 " (limit " + limit.Text() + " per site)";
  return rule;
}

Rule BaselineRule(const char* name, const char* what, uint64_t base, uint64_t now,
                  const GrowthLimit& limit, std::vector<std::string> sites) {
  Rule rule;
  rule.name = name;
  const uint64_t allowance = limit.Allowance(base);
  const uint64_t allowed = allowance > UINT64_MAX - base ? UINT64_MAX : base + allowance;
  rule.broken = now > allowed;
  // now - base, saturated to int64_t.
  const uint64_t magnitude = now >= base ? now - base : base - now;
  const int64_t change = magnitude > INT64_MAX ? (now >= base ? INT64_MAX : INT64_MIN)
                         : now >= base         ? static_cast<int64_t>(magnitude)
                                               : -static_cast<int64_t>(magnitude);
  rule.summary = std::string(what) + " " + FormatBytes(now) + ", baseline " + FormatBytes(base) +
                 " (" + SignedBytes(change) + ", " + PercentChange(base, now) + "; limit " +
                 limit.Text() + ")";
  if (rule.broken) rule.sites = std::move(sites);
  return rule;
}

struct PhaseLimit {
  std::string name;
  uint64_t bytes = 0;
};

// NAME=BYTES; the NAME may itself hold '='.
bool ParsePhaseLimit(const std::string& text, PhaseLimit* out) {
  const size_t eq = text.rfind('=');
  if (eq == std::string::npos || eq == 0) return false;
  out->name = text.substr(0, eq);
  return ParseBytes(text.substr(eq + 1), &out->bytes);
}

bool PhaseMatches(const std::string& path, const std::string& name) {
  return path == name || (path.size() > name.size() && path.ends_with(name) &&
                          path[path.size() - name.size() - 1] == '/');
}

Rule PhasePeakRule(const ReportModel& m, const PhaseLimit& limit) {
  Rule rule;
  rule.name = "phase peak " + limit.name;
  std::vector<const PhasePath*> matched;
  if (m.phases.has_value()) {
    for (const PhasePath& p : m.phases->paths) {
      if (PhaseMatches(p.path, limit.name)) matched.push_back(&p);
    }
  }
  if (matched.empty()) {
    rule.broken = true;
    rule.summary =
        "no phase " + limit.name + " in the report (limit " + FormatBytes(limit.bytes) + ")";
    return rule;
  }
  std::stable_sort(matched.begin(), matched.end(), [](const PhasePath* a, const PhasePath* b) {
    return a->peak_bytes > b->peak_bytes;
  });
  const PhasePath& top = *matched.front();
  rule.broken = top.peak_bytes > limit.bytes;
  rule.summary = FormatBytes(top.peak_bytes) + " while " + top.path + " was open (limit " +
                 FormatBytes(limit.bytes) + ")";
  if (!rule.broken) return rule;
  for (const PhasePath* p : matched) {
    if (p->peak_bytes <= limit.bytes) break;
    std::string line = FormatBytes(p->peak_bytes) + " in " + p->path;
    if (p->peak_site.has_value() && !p->peak_site->location.empty()) {
      line += ", reached at " + p->peak_site->location;
    }
    if (const std::string process = PhasePeakProcess(*p); !process.empty()) {
      line += " in " + process;
    }
    rule.sites.push_back(line);
  }
  return rule;
}

int ArgumentError(const std::string& text) {
  std::fprintf(stderr, "gpuwatch check: %s\n", text.c_str());
  return 2;
}

constexpr char kSizeHelp[] =
    "expected bytes with an optional KiB, MiB or GiB suffix, e.g. 0, 4096 or 512MiB";

}  // namespace

int CheckCommand(const CheckOptions& options, FILE* out) {
  uint64_t max_leak = 0;
  if (!options.max_leak.empty() && !ParseBytes(options.max_leak, &max_leak)) {
    return ArgumentError("--max-leak: invalid size \"" + options.max_leak + "\" (" + kSizeHelp +
                         ")");
  }
  uint64_t max_peak = 0;
  if (!options.max_peak.empty() && !ParseBytes(options.max_peak, &max_peak)) {
    return ArgumentError("--max-peak: invalid size \"" + options.max_peak + "\" (" + kSizeHelp +
                         ")");
  }
  GrowthLimit growth;
  if (!options.max_growth.empty() && !ParseGrowthLimit(options.max_growth, &growth)) {
    return ArgumentError(
        "--max-growth: invalid limit \"" + options.max_growth +
        "\" (expected a percentage such as 10% or a size with its unit such as 0B or "
        "64MiB)");
  }
  std::vector<PhaseLimit> phase_limits;
  for (const std::string& text : options.max_phase_peak) {
    if (!ParsePhaseLimit(text, &phase_limits.emplace_back())) {
      return ArgumentError("--max-phase-peak: invalid limit \"" + text +
                           "\" (expected NAME=BYTES, e.g. forward=12GiB or step/backward=512MiB)");
    }
  }
  if (!options.baseline.empty() && !growth.set) {
    return ArgumentError("--baseline needs --max-growth (e.g. --max-growth 10%)");
  }
  Suppressions suppressions;
  std::string error;
  if (!options.suppressions.empty() && !suppressions.LoadFile(options.suppressions, &error)) {
    return ArgumentError(error);
  }
  const Suppressions* extra = suppressions.empty() ? nullptr : &suppressions;
  Report report;
  if (!ReadReport(options.file, &report, &error)) return ArgumentError(error);
  Report baseline;
  if (!options.baseline.empty() && !ReadReport(options.baseline, &baseline, &error)) {
    return ArgumentError(error);
  }
  const size_t top = static_cast<size_t>(std::max(options.top, 1));

  std::vector<Rule> rules;
  std::vector<std::string> notes;
  const ReportModel& m = report.model;
  if (!m.recording_stopped.empty()) {  // what followed was not recorded: nothing to vouch for
    Rule rule;
    rule.name = "recorded";
    rule.broken = true;
    char at[32];
    std::snprintf(at, sizeof(at), "%.1f s", static_cast<double>(m.recording_stopped_ns) / 1e9);
    rule.summary = "not recorded to its end: " + m.recording_stopped + " (found " + at +
                   " after attach); no limit can be judged";
    rules.push_back(std::move(rule));
  }
  // A checkpoint (what SIGKILL leaves) says nothing of the process's end:
  // the gate fails it, saying when it was taken.
  const bool checkpoint = m.trigger == "checkpoint";
  if (checkpoint) {
    Rule rule;
    rule.name = "exit report";
    rule.broken = true;
    rule.summary = CheckpointTaken(report);
    rules.push_back(std::move(rule));
  }
  const bool failed = m.cuda_errors.has_value() && m.cuda_errors->run_failed();
  if (failed) rules.push_back(CudaErrorRule(*m.cuda_errors, top));
  const LeakSplit split = SplitLeaks(m.leaks_device, extra, options.include_categories);
  rules.push_back(LeakRule(split, max_leak, top));
  if (failed || checkpoint) {  // what was live then is not known to leak
    Rule& leak = rules.back();
    leak.broken = false;
    leak.sites.clear();
    leak.summary = "not judged: " + FormatBytes(split.leaked_bytes) +
                   (failed ? " of device memory live when the run failed (cuda error)"
                           : " of device memory live at the checkpoint, not known to leak");
  }
  std::map<std::string, uint64_t> by_rule;
  for (size_t i = 0; i < split.suppressed.size(); ++i) {
    by_rule[split.suppressed_by[i]] += split.suppressed[i]->bytes;
  }
  notes.reserve(by_rule.size());
  for (const auto& [rule, bytes] : by_rule) {
    notes.push_back(FormatBytes(bytes) + " suppressed by " + rule);
  }
  std::map<std::string, uint64_t> by_category;
  for (size_t i = 0; i < split.categorized.size(); ++i) {
    by_category[split.category_of[i]] += split.categorized[i]->bytes;
  }
  for (const auto& [category, bytes] : by_category) {
    notes.push_back(FormatBytes(bytes) + " kept by " + category +
                    ", not counted as leaked (--include-categories counts it)");
  }
  const uint64_t host_leaked = m.leaks_host.bytes;
  if (host_leaked != 0) {
    notes.push_back(FormatBytes(host_leaked) + " of pinned host memory live at exit (not checked)");
  }

  const uint64_t peak = m.totals.device_peak_bytes;
  if (!options.max_peak.empty()) {
    Rule rule;
    rule.name = "peak";
    rule.broken = peak > max_peak;
    rule.summary = "device peak " + FormatBytes(peak) + " (limit " + FormatBytes(max_peak) + ")";
    if (rule.broken) {
      const std::vector<PeakSite>& sites = m.peak.sites;
      for (size_t i = 0; i < sites.size() && i < top; ++i) {
        rule.sites.push_back(SiteLine(sites[i], FormatBytes(sites[i].bytes)));
      }
    }
    rules.push_back(std::move(rule));
  }

  for (const PhaseLimit& limit : phase_limits) rules.push_back(PhasePeakRule(report.model, limit));

  if (growth.set && options.baseline.empty()) {
    rules.push_back(SuspectRule(m, growth, extra, options.include_categories, &notes));
  } else if (growth.set) {
    const ReportModel& base = baseline.model;
    rules.push_back(
        BaselineRule("growth of the peak", "device peak", base.totals.device_peak_bytes, peak,
                     growth, GrownSites(Pointers(base.peak.sites), Pointers(m.peak.sites), top)));
    const LeakSplit base_split = SplitLeaks(base.leaks_device, extra, options.include_categories);
    // Only the sites that count as leaked, matched by stack.
    rules.push_back(BaselineRule("growth of leaks", "leaked device memory", base_split.leaked_bytes,
                                 split.leaked_bytes, growth,
                                 GrownSites(base_split.leaked, split.leaked, top)));
  }

  size_t broken = 0;
  const std::string against = options.baseline.empty() ? "" : " against " + baseline.path;
  std::fprintf(out, "gpuwatch check %s%s\n", report.path.c_str(), against.c_str());
  for (const Rule& rule : rules) {
    std::fprintf(out, "  %-4s  %s: %s\n", rule.broken ? "FAIL" : "ok", rule.name.c_str(),
                 rule.summary.c_str());
    for (const std::string& site : rule.sites) std::fprintf(out, "          %s\n", site.c_str());
    if (rule.broken) ++broken;
  }
  for (const std::string& note : notes) std::fprintf(out, "  note: %s\n", note.c_str());
  if (broken == 0) {
    std::fprintf(out, "gpuwatch check: passed (%zu %s)\n", rules.size(),
                 rules.size() == 1 ? "rule" : "rules");
    return 0;
  }
  std::fprintf(out, "gpuwatch check: FAILED: %zu of %zu %s broken\n", broken, rules.size(),
               rules.size() == 1 ? "rule" : "rules");
  return 1;
}

}  // namespace gpuwatch::tools
