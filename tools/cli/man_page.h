// Man pages (roff, man(7) macros) of the `gpuwatch` command, written from its
// own definition (cli_doc.h) and, for ENVIRONMENT, from the table of
// variables in docs/configuration.md.
#ifndef GPUWATCH_TOOLS_CLI_MAN_PAGE_H_
#define GPUWATCH_TOOLS_CLI_MAN_PAGE_H_

#include <string>
#include <vector>

#include "tools/cli/cli_doc.h"

namespace gpuwatch::tools {

// One row of docs/configuration.md's table, its cells in Markdown.
struct EnvDoc {
  std::string name;
  std::string default_value;
  std::string meaning;
};

// The rows of the first Markdown table whose first cells are `NAME`s.
std::vector<EnvDoc> ReadEnvTable(const std::string& markdown);

// gpuwatch.1 for commands[0] (which lists every subcommand and variable),
// gpuwatch-NAME.1 for a subcommand (the variables it reads: all of them for
// run, whose command gets them, else those that name it or its options).
std::string ManPage(const std::vector<CommandDoc>& commands, size_t index,
                    const std::vector<EnvDoc>& env, const std::string& version);

// "gpuwatch" or "gpuwatch-NAME": the page's name, without ".1".
std::string ManPageName(const std::vector<CommandDoc>& commands, size_t index);

}  // namespace gpuwatch::tools

#endif  // GPUWATCH_TOOLS_CLI_MAN_PAGE_H_
