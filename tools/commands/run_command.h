// `gpuwatch run`: runs a command with libgpuwatch.so attached.
#ifndef GPUWATCH_TOOLS_COMMANDS_RUN_COMMAND_H_
#define GPUWATCH_TOOLS_COMMANDS_RUN_COMMAND_H_

#include <string>
#include <vector>

namespace gpuwatch::tools {

struct RunOptions {
  std::string output;   // -o: GPUWATCH_OUTPUT for the child ("" = library default)
  std::string library;  // --library: libgpuwatch.so to use ("" = found next to us)
  int depth = -1;       // --depth: GPUWATCH_DEPTH (-1 = library default)
  bool no_summary = false;
  std::string suppressions;  // --suppressions: GPUWATCH_SUPPRESSIONS ("" = none)
  // --alloc-fn (repeatable): GPUWATCH_ALLOC_FN, after what the environment has.
  std::vector<std::string> alloc_fns;
  int exitcode = -1;   // --exitcode: GPUWATCH_EXITCODE (-1 = library default)
  int sample_ms = -1;  // --sample-ms: GPUWATCH_SAMPLE_MS (-1 = library default)
  // --torch-blocks: the Python child gets python/gpuwatch/torch_shim first
  // on PYTHONPATH (its sitecustomize hands PyTorch's blocks over).
  bool torch_blocks = false;
  std::vector<std::string> command;
};

// Finds libgpuwatch.so: $GPUWATCH_LIBRARY, then ../lib next to this
// executable (build tree and install prefix alike). Returns "" when absent.
std::string FindLibrary(const std::string& self_exe);

// Runs the command and returns the exit status a shell would give: the
// child's status, or 128 + N when signal N ended it. Returns 127 when the
// command cannot be executed, 2 when the options are wrong. After the child
// exits, prints on stderr where each report went (the library reports them
// to a log file named by GPUWATCH_RUN_LOG instead of announcing them itself),
// or that none was written.
int RunCommand(const RunOptions& options, const std::string& self_exe);

}  // namespace gpuwatch::tools

#endif  // GPUWATCH_TOOLS_COMMANDS_RUN_COMMAND_H_
