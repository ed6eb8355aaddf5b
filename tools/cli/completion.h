// Shell completion for `gpuwatch`, written from its own definition
// (cli_doc.h): subcommands, their options, the choices of an option that has
// them, paths where an option takes a FILE or a DIR, and the command after
// `gpuwatch run --`.
#ifndef GPUWATCH_TOOLS_CLI_COMPLETION_H_
#define GPUWATCH_TOOLS_CLI_COMPLETION_H_

#include <string>
#include <vector>

#include "tools/cli/cli_doc.h"

namespace gpuwatch::tools {

// A bash script that defines _gpuwatch and registers it (`complete -F`);
// installed as share/bash-completion/completions/gpuwatch.
std::string BashCompletion(const std::vector<CommandDoc>& commands);

// A zsh completion function (`#compdef gpuwatch`), installed as _gpuwatch on
// zsh's fpath.
std::string ZshCompletion(const std::vector<CommandDoc>& commands);

}  // namespace gpuwatch::tools

#endif  // GPUWATCH_TOOLS_CLI_COMPLETION_H_
