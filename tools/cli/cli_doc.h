// The `gpuwatch` command line as the generators read it (gpuwatch_docgen):
// each command and each option with its names, value, help, default, choices
// and what completes its value, read off the CLI11 App that main.cc parses
// with (cli_app.h), so that the man pages and completions cannot drift.
#ifndef GPUWATCH_TOOLS_CLI_CLI_DOC_H_
#define GPUWATCH_TOOLS_CLI_CLI_DOC_H_

#include <string>
#include <vector>

#include "CLI/CLI.hpp"

namespace gpuwatch::tools {

enum class ValueKind {
  kNone,     // a flag: no value
  kText,     // a value with nothing to complete
  kFile,     // a path (type name FILE)
  kDir,      // a directory (type name DIR)
  kCommand,  // a command and its arguments (type name COMMAND)
  kChoice,   // one of `choices` (a CLI::IsMember check)
};

struct OptionDoc {
  std::vector<std::string> names;  // "-o", "--output"; empty for a positional
  std::string positional;          // a positional's name ("file"); "" for an option
  std::string value;               // "FILE", "INT", ...; "" for a flag
  std::string help;
  std::string default_value;          // "" when none is shown
  std::vector<std::string> choices;   // kChoice: the values
  std::string range;                  // "0 to 128" from a CLI::Range check; "" when none
  std::vector<std::string> needs;     // options it needs ("--textfile")
  std::vector<std::string> excludes;  // options it excludes
  ValueKind kind = ValueKind::kText;
  bool required = false;
  bool repeatable = false;  // takes many values (a vector)
};

struct CommandDoc {
  std::string name;                // "gpuwatch" for the top level, else the subcommand's
  std::string description;         // one line
  std::string exit_status;         // the footer's "Exit status: ..." without its prefix
  std::vector<OptionDoc> options;  // as defined, positionals included
};

// The top-level command first, then each subcommand in definition order.
std::vector<CommandDoc> DescribeCli(CLI::App& app);

}  // namespace gpuwatch::tools

#endif  // GPUWATCH_TOOLS_CLI_CLI_DOC_H_
