// The `gpuwatch` command. Subcommands read report files or run programs; none
// of them links the in-process library.
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <string>

#include "CLI/CLI.hpp"
#include "tools/run_command.h"

namespace {

std::string SelfExe(const char* argv0) {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return argv0;
  buf[n] = '\0';
  return buf;
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
  run_cmd->add_option("--library", run.library, "libgpuwatch.so to use");
  run_cmd->add_option("command", run.command, "The command to run, after --")->required();
  run_cmd->positionals_at_end();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  if (run_cmd->parsed()) return gpuwatch::tools::RunCommand(run, SelfExe(argv[0]));
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpuwatch: %s\n", e.what());
    return 2;
  }
}
