// The `gpuwatch` command line, defined once: main.cc parses with it, and
// gpuwatch_docgen (docgen_main.cc) walks it to write the man pages and the
// shell completions, so that neither can drift from the options.
#ifndef GPUWATCH_TOOLS_CLI_CLI_APP_H_
#define GPUWATCH_TOOLS_CLI_CLI_APP_H_

#include <string>

#include "CLI/CLI.hpp"
#include "tools/commands.h"
#include "tools/commands/run_command.h"
#include "tools/commands/top_command.h"
#include "tools/commands/why_command.h"

namespace gpuwatch::tools {

// What each subcommand's options are parsed into.
struct CliOptions {
  RunOptions run;
  ReportOptions report;
  DiffOptions diff;
  CheckOptions check;
  MergeOptions merge;
  TopOptions top;
  WhyOptions why;
  ExporterOptions exporter;
};

// Names `app` gpuwatch and adds every subcommand and option, bound to
// `options` (which must outlive `app`). Conventions the generators read:
// an option's type name FILE or DIR is completed as a path; a CLI::IsMember
// check gives its choices; a default shown (capture_default_str) is the
// default the command uses.
void DefineCli(CLI::App* app, CliOptions* options, const std::string& version);

}  // namespace gpuwatch::tools

#endif  // GPUWATCH_TOOLS_CLI_CLI_APP_H_
