// The `gpuwatch` command. Subcommands read report files or run programs; none
// of them links the in-process library.
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <new>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "tools/commands.h"
#include "tools/commands/run_command.h"
#include "tools/commands/top_command.h"
#include "tools/commands/why_command.h"

namespace {

std::string SelfExe(const char* argv0) {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return argv0;
  buf[n] = '\0';
  return buf;
}

// Edits (insert, delete, replace, swap two neighbours) between a and b.
size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

// A first argument that is no subcommand (`gpuwatch repotr x.json`): one line
// naming it and the nearest subcommand, as git does; CLI11 alone would say
// only that the arguments were not expected. Returns false when `word` is a
// subcommand or an option.
bool UnknownSubcommand(const CLI::App& app, const std::string& word) {
  if (word.empty() || word[0] == '-') return false;
  std::string names;
  std::string nearest;
  size_t nearest_edits = 3;  // suggest only within 2 edits
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    const std::string& name = sub->get_name();
    if (name == word) return false;
    names += (names.empty() ? "" : ", ") + name;
    const size_t edits = EditDistance(word, name);
    if (edits < nearest_edits) {
      nearest_edits = edits;
      nearest = name;
    }
  }
  if (nearest.empty()) {
    std::fprintf(stderr, "gpuwatch: unknown command \"%s\" (the commands: %s)\n", word.c_str(),
                 names.c_str());
  } else {
    std::fprintf(stderr, "gpuwatch: unknown command \"%s\"; did you mean \"%s\"?\n", word.c_str(),
                 nearest.c_str());
  }
  return true;
}

int Main(int argc, char** argv) {
  CLI::App app{"gpuwatch: GPU memory and transfer profiler", "gpuwatch"};
  app.require_subcommand(1);
  app.set_version_flag("--version", GPUWATCH_VERSION_STRING);

  gpuwatch::tools::RunOptions run;
  CLI::App* run_cmd =
      app.add_subcommand("run", "Run COMMAND with gpuwatch attached and write its report");
  run_cmd->add_option("-o,--output", run.output,
                      "Report file pattern (%p pid, %h host, %r rank); default gpuwatch.%p.json");
  run_cmd->add_option("--depth", run.depth, "Native frames per stack (0-128)")
      ->check(CLI::Range(0, 128));
  run_cmd->add_flag("--no-summary", run.no_summary, "Do not print the summary on stderr");
  run_cmd->add_option("--suppressions", run.suppressions,
                      "Suppressions file (leak:PATTERN, growth:PATTERN lines)");
  run_cmd
      ->add_option("--alloc-fn", run.alloc_fns,
                   "An allocation helper of the program (a function name, * globs; "
                   "repeatable): sites are named by its callers")
      ->allow_extra_args(false);
  run_cmd
      ->add_option("--exitcode", run.exitcode,
                   "Exit with N instead of 0 when device memory leaked (0: never)")
      ->check(CLI::Range(0, 255));
  run_cmd
      ->add_option("--sample-ms", run.sample_ms,
                   "Timeline sampling interval in ms for growth detection (0: off)")
      ->check(CLI::Range(0, 3600000));
  run_cmd->add_flag("--torch-blocks", run.torch_blocks,
                    "Python: put PyTorch's allocator blocks (with their Python lines) into the "
                    "report (docs/pytorch.md)");
  run_cmd->add_option("--library", run.library, "libgpuwatch.so to use");
  run_cmd->add_option("command", run.command, "The command to run, after --")->required();
  run_cmd->positionals_at_end();

  gpuwatch::tools::ReportOptions report;
  CLI::App* report_cmd = app.add_subcommand(
      "report", "Render a report: leaks, growth, peak and transfers, each with file:line");
  report_cmd->add_option("file", report.file, "Report file")->required();
  report_cmd
      ->add_option("--format", report.format,
                   "text (default), json, collapsed stacks, html (a self-contained page), "
                   "pprof (gzipped profile.proto; needs -o), or perfetto (trace-event JSON for "
                   "ui.perfetto.dev)")
      ->check(CLI::IsMember({"text", "json", "collapsed", "html", "pprof", "perfetto"}));
  report_cmd->add_option("-o,--output", report.output, "Write to FILE instead of stdout");
  report_cmd->add_option("--top", report.top, "Sites shown per list (default 10)")
      ->check(CLI::Range(1, 1000000));
  report_cmd
      ->add_option("--what", report.what,
                   "What --format collapsed weighs: leaks (default), peak or allocated")
      ->check(CLI::IsMember({"leaks", "peak", "allocated"}));  // not a report key: --what's choices

  gpuwatch::tools::DiffOptions diff;
  CLI::App* diff_cmd = app.add_subcommand(
      "diff", "Compare two reports: per site and in total, what grew, shrank, appeared or went");
  diff_cmd->add_option("base", diff.base, "Report to compare against")->required();
  diff_cmd->add_option("new", diff.now, "Report to compare")->required();
  diff_cmd->add_option("--top", diff.top, "Sites shown per list (default 20)")
      ->check(CLI::Range(1, 1000000));

  gpuwatch::tools::CheckOptions check;
  CLI::App* check_cmd = app.add_subcommand(
      "check", "CI gate: exit 0 when the report is within every limit, 1 when not, 2 on bad input");
  check_cmd->add_option("file", check.file, "Report file")->required();
  check_cmd->add_option("--max-leak", check.max_leak,
                        "Device memory that may leak, e.g. 0 (default), 4096, 64MiB");
  check_cmd->add_option("--max-peak", check.max_peak, "Highest device peak allowed, e.g. 2GiB");
  check_cmd->add_option("--max-growth", check.max_growth,
                        "Growth allowed, PERCENT% or BYTES: over --baseline (peak and leaks), "
                        "else per growth suspect");
  check_cmd->add_option("--max-phase-peak", check.max_phase_peak,
                        "NAME=BYTES: highest device memory while phase NAME was open (a path "
                        "such as step/forward, or its last part); repeatable");
  check_cmd->add_option("--baseline", check.baseline, "Report of a known-good run");
  check_cmd->add_option("--suppressions", check.suppressions,
                        "Suppressions file (leak:PATTERN, growth:PATTERN lines)");
  check_cmd->add_flag("--include-categories", check.include_categories,
                      "Count memory kept by libraries (cuBLAS, NCCL, caching allocators, ...)");
  check_cmd->add_option("--top", check.top, "Sites printed per broken rule (default 5)")
      ->check(CLI::Range(1, 1000000));

  gpuwatch::tools::MergeOptions merge;
  CLI::App* merge_cmd =
      app.add_subcommand("merge", "Merge the reports of many processes or ranks into one report");
  merge_cmd->add_option("files", merge.files, "Report files")->required();
  merge_cmd->add_option("-o,--output", merge.output, "Merged report to write")->required();

  gpuwatch::tools::TopOptions top;
  CLI::App* top_cmd = app.add_subcommand(
      "top", "Watch the processes under gpuwatch on this machine: device memory, growth, sites");
  top_cmd->add_flag("--once", top.once, "Print one frame as plain text and exit");
  top_cmd->add_option("--dir", top.dir,
                      "Live directory (default: GPUWATCH_LIVE_DIR, else per user)");
  top_cmd->add_option("--pid", top.pid, "Select this process (default: the first listed)");
  top_cmd->add_option("--sites", top.sites, "Sites listed for the selected process (--once)")
      ->check(CLI::Range(1, 1000));
  top_cmd->add_option("--sort", top.sort, "Sort processes and sites by: live, growth, peak, pid")
      ->check(CLI::IsMember({"live", "growth", "peak", "pid"}));
  top_cmd->add_option("--width", top.width, "Columns of a --once frame (default 80)")
      ->check(CLI::Range(60, 1000));
  top_cmd
      ->add_option("--timeout-ms", top.timeout_ms,
                   "How long to wait for the processes' answers (default 500, 2000 with --once)")
      ->check(CLI::Range(1, 600000));
  top_cmd
      ->add_option("--idle-after", top.idle_after_s,
                   "Seconds without CUDA activity that make a process idle (default: "
                   "GPUWATCH_IDLE_SECONDS, else 600)")
      ->check(CLI::Range(1, 31536000));

  gpuwatch::tools::WhyOptions why;
  CLI::App* why_cmd = app.add_subcommand(
      "why", "What a process under gpuwatch is doing now, even hung in a CUDA call or stopped");
  why_cmd->add_option("pid", why.pid, "The process")->required()->check(CLI::PositiveNumber);
  why_cmd->add_option("--dir", why.dir,
                      "Live directory (default: GPUWATCH_LIVE_DIR, else per user)");

  gpuwatch::tools::ExporterOptions exporter;
  CLI::App* exporter_cmd = app.add_subcommand(
      "exporter", "Serve the processes under gpuwatch on this machine as Prometheus metrics");
  CLI::Option* listen_opt =
      exporter_cmd->add_option("--listen", exporter.listen,
                               "HOST:PORT to serve /metrics on (default 127.0.0.1:9468; port 0: "
                               "any free port)");
  exporter_cmd->add_option("--dir", exporter.dir,
                           "Live directory (default: GPUWATCH_LIVE_DIR, else per user)");
  exporter_cmd->add_option("--top", exporter.top, "Sites per process (default 20)")
      ->check(CLI::Range(1, 1000));
  exporter_cmd
      ->add_option("--timeout-ms", exporter.timeout_ms,
                   "How long a scrape waits for the processes' answers (default 1000)")
      ->check(CLI::Range(1, 600000));
  exporter_cmd
      ->add_option("--idle-after", exporter.idle_after_s,
                   "Seconds without CUDA activity that make a process idle (default: "
                   "GPUWATCH_IDLE_SECONDS, else 600)")
      ->check(CLI::Range(1, 31536000));
  CLI::Option* textfile_opt =
      exporter_cmd
          ->add_option("--textfile", exporter.textfile,
                       "Write DIR/gpuwatch.prom for node_exporter's textfile collector instead "
                       "of serving")
          ->excludes(listen_opt);
  exporter_cmd
      ->add_option("--interval", exporter.interval,
                   "Seconds between --textfile writes (default 15)")
      ->check(CLI::Range(1, 86400))
      ->needs(textfile_opt);
  exporter_cmd->add_flag("--once", exporter.once, "Write the --textfile once and exit")
      ->needs(textfile_opt);

  if (argc > 1 && UnknownSubcommand(app, argv[1])) return 2;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  if (run_cmd->parsed()) return gpuwatch::tools::RunCommand(run, SelfExe(argv[0]));
  if (report_cmd->parsed()) return gpuwatch::tools::ReportCommand(report, stdout);
  if (diff_cmd->parsed()) return gpuwatch::tools::DiffCommand(diff, stdout);
  if (check_cmd->parsed()) return gpuwatch::tools::CheckCommand(check, stdout);
  if (merge_cmd->parsed()) return gpuwatch::tools::MergeCommand(merge, stdout);
  if (top_cmd->parsed()) return gpuwatch::tools::TopCommand(top, stdout);
  if (why_cmd->parsed()) return gpuwatch::tools::WhyCommand(why, stdout);
  if (exporter_cmd->parsed()) return gpuwatch::tools::ExporterCommand(exporter);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Main(argc, argv);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "gpuwatch: out of memory (the machine's or this process's limit)\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpuwatch: %s\n", e.what());
    return 2;
  }
}
