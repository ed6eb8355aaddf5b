#include "tools/cli/cli_app.h"

namespace gpuwatch::tools {

namespace {

constexpr const char* kLiveDirHelp = "Live directory (default: GPUWATCH_LIVE_DIR, else per user)";
constexpr const char* kIdleAfterHelp =
    "Seconds without CUDA activity that make a process idle (default: GPUWATCH_IDLE_SECONDS, "
    "else 600)";
constexpr const char* kReadStatus =
    "Exit status: 0 on success, 2 when an argument is wrong or an input cannot be read (one line "
    "on stderr names the problem).";

void DefineRun(CLI::App* app, RunOptions* run) {
  CLI::App* cmd =
      app->add_subcommand("run", "Run COMMAND with gpuwatch attached and write its report");
  cmd->footer(
      "Exit status: the command's own, or 128+N when signal N ended it (as in a shell); 127 when "
      "it cannot be executed; 2 when an option is wrong; --exitcode N when device memory leaked.");
  cmd->add_option("-o,--output", run->output,
                  "Report file pattern (%p pid, %h host, %r rank); default gpuwatch.%p.json")
      ->type_name("FILE");
  cmd->add_option("--depth", run->depth, "Native frames per stack")->check(CLI::Range(0, 128));
  cmd->add_flag("--no-summary", run->no_summary, "Do not print the summary on stderr");
  cmd->add_option("--suppressions", run->suppressions,
                  "Suppressions file (leak:PATTERN, growth:PATTERN lines)")
      ->type_name("FILE");
  cmd->add_option("--alloc-fn", run->alloc_fns,
                  "An allocation helper of the program (a function name, * globs; "
                  "repeatable): sites are named by its callers")
      ->type_name("NAME")
      ->allow_extra_args(false);
  cmd->add_option("--exitcode", run->exitcode,
                  "Exit with N instead of 0 when device memory leaked (0: never)")
      ->check(CLI::Range(0, 255));
  cmd->add_option("--sample-ms", run->sample_ms,
                  "Timeline sampling interval in ms for growth detection (0: off)")
      ->check(CLI::Range(0, 3600000));
  cmd->add_flag("--torch-blocks", run->torch_blocks,
                "Python: put PyTorch's allocator blocks (with their Python lines) into the report "
                "(docs/pytorch.md)");
  cmd->add_option("--library", run->library, "libgpuwatch.so to use")->type_name("FILE");
  cmd->add_option("command", run->command, "The command to run, after --")
      ->required()
      ->type_name("COMMAND");
  cmd->positionals_at_end();
}

void DefineReport(CLI::App* app, ReportOptions* report) {
  CLI::App* cmd = app->add_subcommand(
      "report", "Render a report: leaks, growth, peak and transfers, each with file:line");
  cmd->footer(kReadStatus);
  cmd->add_option("file", report->file, "Report file")->required()->type_name("FILE");
  cmd->add_option("--format", report->format,
                  "text, json, collapsed stacks, html (a self-contained page), pprof (gzipped "
                  "profile.proto; needs -o), or perfetto (trace-event JSON for ui.perfetto.dev)")
      ->check(CLI::IsMember({"text", "json", "collapsed", "html", "pprof", "perfetto"}))
      ->capture_default_str();
  cmd->add_option("-o,--output", report->output, "Write to FILE instead of stdout")
      ->type_name("FILE");
  cmd->add_option("--top", report->top, "Sites shown per list")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  cmd->add_option("--what", report->what,
                  "What --format collapsed weighs: leaks, peak or allocated")
      ->check(CLI::IsMember({"leaks", "peak", "allocated"}))  // not a report key: --what's choices
      ->capture_default_str();
}

void DefineDiff(CLI::App* app, DiffOptions* diff) {
  CLI::App* diff_cmd = app->add_subcommand(
      "diff", "Compare two reports: per site and in total, what grew, shrank, appeared or went");
  diff_cmd->footer(kReadStatus);
  diff_cmd->add_option("base", diff->base, "Report to compare against")
      ->required()
      ->type_name("FILE");
  diff_cmd->add_option("new", diff->now, "Report to compare")->required()->type_name("FILE");
  diff_cmd->add_option("--top", diff->top, "Sites shown per list")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
}

void DefineMerge(CLI::App* app, MergeOptions* merge) {
  CLI::App* merge_cmd =
      app->add_subcommand("merge", "Merge the reports of many processes or ranks into one report");
  merge_cmd->footer(kReadStatus);
  merge_cmd->add_option("files", merge->files, "Report files")->required()->type_name("FILE");
  merge_cmd->add_option("-o,--output", merge->output, "Merged report to write")
      ->required()
      ->type_name("FILE");
}

void DefineCheck(CLI::App* app, CheckOptions* check) {
  CLI::App* cmd = app->add_subcommand(
      "check", "CI gate: exit 0 when the report is within every limit, 1 when not, 2 on bad input");
  cmd->footer(
      "Exit status: 0 when the report is within every limit, 1 when a rule is broken, 2 when an "
      "argument is wrong or an input cannot be read.");
  cmd->add_option("file", check->file, "Report file")->required()->type_name("FILE");
  cmd->add_option("--max-leak", check->max_leak, "Device memory that may leak, e.g. 4096, 64MiB")
      ->type_name("BYTES")
      ->default_str("0");
  cmd->add_option("--max-peak", check->max_peak, "Highest device peak allowed, e.g. 2GiB")
      ->type_name("BYTES");
  cmd->add_option("--max-growth", check->max_growth,
                  "Growth allowed, PERCENT% or BYTES: over --baseline (peak and leaks), else per "
                  "growth suspect")
      ->type_name("PERCENT%|BYTES");
  cmd->add_option("--max-phase-peak", check->max_phase_peak,
                  "NAME=BYTES: highest device memory while phase NAME was open (a path such as "
                  "step/forward, or its last part); repeatable")
      ->type_name("NAME=BYTES");
  cmd->add_option("--baseline", check->baseline, "Report of a known-good run")->type_name("FILE");
  cmd->add_option("--suppressions", check->suppressions,
                  "Suppressions file (leak:PATTERN, growth:PATTERN lines)")
      ->type_name("FILE");
  cmd->add_flag("--include-categories", check->include_categories,
                "Count memory kept by libraries (cuBLAS, NCCL, caching allocators, ...)");
  cmd->add_option("--top", check->top, "Sites printed per broken rule")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
}

void DefineTopAndWhy(CLI::App* app, TopOptions* top, WhyOptions* why) {
  CLI::App* top_cmd = app->add_subcommand(
      "top", "Watch the processes under gpuwatch on this machine: device memory, growth, sites");
  top_cmd->footer(
      "Exit status: 0 on success, 2 when an argument is wrong or the live directory cannot be "
      "read.");
  top_cmd->add_flag("--once", top->once, "Print one frame as plain text and exit");
  top_cmd->add_option("--dir", top->dir, kLiveDirHelp)->type_name("DIR");
  top_cmd->add_option("--pid", top->pid, "Select this process (default: the first listed)");
  top_cmd->add_option("--sites", top->sites, "Sites listed for the selected process (--once)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  top_cmd->add_option("--sort", top->sort, "Sort processes and sites by: live, growth, peak, pid")
      ->check(CLI::IsMember({"live", "growth", "peak", "pid"}))
      ->capture_default_str();
  top_cmd->add_option("--width", top->width, "Columns of a --once frame")
      ->check(CLI::Range(60, 1000))
      ->capture_default_str();
  top_cmd
      ->add_option("--timeout-ms", top->timeout_ms,
                   "How long to wait for the processes' answers (default 500, 2000 with --once)")
      ->check(CLI::Range(1, 600000));
  top_cmd->add_option("--idle-after", top->idle_after_s, kIdleAfterHelp)
      ->check(CLI::Range(1, 31536000));

  CLI::App* why_cmd = app->add_subcommand(
      "why", "What a process under gpuwatch is doing now, even hung in a CUDA call or stopped");
  why_cmd->footer(
      "Exit status: 0 when the status page was read; 1 when gpuwatch is not in the process or "
      "its page cannot be read; 2 when an argument is wrong.");
  why_cmd->add_option("pid", why->pid, "The process")
      ->required()
      ->check(CLI::PositiveNumber)
      ->type_name("PID");
  why_cmd->add_option("--dir", why->dir, kLiveDirHelp)->type_name("DIR");
}

void DefineExporter(CLI::App* app, ExporterOptions* exporter) {
  CLI::App* cmd = app->add_subcommand(
      "exporter", "Serve the processes under gpuwatch on this machine as Prometheus metrics");
  cmd->footer(
      "Exit status: 0 after SIGINT or SIGTERM (or one --textfile --once write); 2 on a bad "
      "--listen, a port it cannot listen on, an unsafe live directory or an unwritable "
      "--textfile directory.");
  CLI::Option* listen_opt =
      cmd->add_option("--listen", exporter->listen,
                      "HOST:PORT or :PORT (every address) to serve /metrics on; IPv6 in "
                      "brackets, [::1]:9468; port 0: any free port")
          ->type_name("HOST:PORT")
          ->capture_default_str();
  cmd->add_option("--dir", exporter->dir, kLiveDirHelp)->type_name("DIR");
  cmd->add_flag("--node", exporter->node,
                "Every user's processes: read each user's directory in the node root (--dir, "
                "else GPUWATCH_NODE_DIR, else /run/gpuwatch), as its owner or root");
  cmd->add_option("--top", exporter->top, "Sites per process")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cmd->add_option("--timeout-ms", exporter->timeout_ms,
                  "How long a scrape waits for the processes' answers")
      ->check(CLI::Range(1, 600000))
      ->capture_default_str();
  cmd->add_option("--idle-after", exporter->idle_after_s, kIdleAfterHelp)
      ->check(CLI::Range(1, 31536000));
  CLI::Option* textfile_opt =
      cmd->add_option("--textfile", exporter->textfile,
                      "Write DIR/gpuwatch.prom for node_exporter's textfile collector instead of "
                      "serving")
          ->type_name("DIR")
          ->excludes(listen_opt);
  cmd->add_option("--interval", exporter->interval, "Seconds between --textfile writes")
      ->check(CLI::Range(1, 86400))
      ->needs(textfile_opt)
      ->capture_default_str();
  cmd->add_flag("--once", exporter->once, "Write the --textfile once and exit")
      ->needs(textfile_opt);
}

}  // namespace

void DefineCli(CLI::App* app, CliOptions* options, const std::string& version) {
  app->name("gpuwatch");
  app->description("gpuwatch: GPU memory and transfer profiler");
  app->footer(
      "Exit status: each command's own (gpuwatch COMMAND --help says it); 2 when the command line "
      "is wrong.");
  app->require_subcommand(1);
  app->set_version_flag("--version", version);
  DefineRun(app, &options->run);
  DefineReport(app, &options->report);
  DefineDiff(app, &options->diff);
  DefineCheck(app, &options->check);
  DefineMerge(app, &options->merge);
  DefineTopAndWhy(app, &options->top, &options->why);
  DefineExporter(app, &options->exporter);
}

}  // namespace gpuwatch::tools
