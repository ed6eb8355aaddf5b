// The report-reading subcommands of `gpuwatch`: report, diff, check, merge.
// Each returns the process exit status: 0 on success, 2 when an input cannot
// be read or an argument is wrong (one line on stderr names the problem), and
// for `check`, 1 when a rule is broken. Output goes to `out` (stdout in the
// command), diagnostics to stderr.
#ifndef GPUWATCH_TOOLS_COMMANDS_H_
#define GPUWATCH_TOOLS_COMMANDS_H_

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace gpuwatch::tools {

struct ReportOptions {
  std::string file;
  std::string format = "text";  // text | json | collapsed | html | pprof | perfetto
  int top = 10;                 // sites per list
  std::string what = "leaks";   // collapsed: leaks | peak | allocated
  std::string output;           // -o: write here instead of `out`; "" = `out`
};
int ReportCommand(const ReportOptions& options, FILE* out);

struct DiffOptions {
  std::string base;
  std::string now;
  int top = 20;  // sites per list
};
int DiffCommand(const DiffOptions& options, FILE* out);

struct CheckOptions {
  std::string file;
  std::string baseline;                     // "" = none
  std::string max_leak;                     // BYTES; "" = 0
  std::string max_peak;                     // BYTES; "" = no limit
  std::string max_growth;                   // PERCENT% or BYTES; "" = no limit
  std::vector<std::string> max_phase_peak;  // NAME=BYTES each
  std::string suppressions;                 // file; "" = none
  bool include_categories = false;
  int top = 5;  // sites printed per broken rule
};
int CheckCommand(const CheckOptions& options, FILE* out);

struct MergeOptions {
  std::vector<std::string> files;
  std::string output;
};
int MergeCommand(const MergeOptions& options, FILE* out);

// `gpuwatch exporter` (tools/commands/exporter_command.cc): serves the live state of
// the processes under gpuwatch as Prometheus metrics until SIGINT or SIGTERM
// (exit 0), or writes them to TEXTFILE/gpuwatch.prom; 2 on a bad --listen, a
// port it cannot listen on, an unsafe live directory or an unwritable
// --textfile directory.
struct ExporterOptions {
  std::string listen = "127.0.0.1:9468";  // HOST:PORT; port 0 = any free port
  std::string dir;                        // live directory; "" = the environment's
  bool node = false;      // every user's processes: `dir` is the node root ("" = GPUWATCH_NODE_DIR)
  int top = 20;           // sites per process
  std::string textfile;   // write DIR/gpuwatch.prom instead of serving
  int interval = 15;      // seconds between --textfile writes
  bool once = false;      // --textfile: write once and exit
  int timeout_ms = 1000;  // how long a scrape waits for the processes
  uint64_t idle_after_s = 0;  // --idle-after; 0: GPUWATCH_IDLE_SECONDS, else 600
};
int ExporterCommand(const ExporterOptions& options);

}  // namespace gpuwatch::tools

#endif  // GPUWATCH_TOOLS_COMMANDS_H_
