// The `gpuwatch` command. Subcommands read report files or run programs; none
// of them links the in-process library. The command line itself is defined in
// tools/cli/cli_app.cc (the man pages and completions are generated from it).
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <new>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "tools/cli/cli_app.h"

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
  CLI::App app;
  gpuwatch::tools::CliOptions o;
  gpuwatch::tools::DefineCli(&app, &o, GPUWATCH_VERSION_STRING);
  if (argc > 1 && UnknownSubcommand(app, argv[1])) return 2;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  const auto parsed = [&app](const char* name) { return app.get_subcommand(name)->parsed(); };
  if (parsed("run")) return gpuwatch::tools::RunCommand(o.run, SelfExe(argv[0]));
  if (parsed("report")) return gpuwatch::tools::ReportCommand(o.report, stdout);
  if (parsed("diff")) return gpuwatch::tools::DiffCommand(o.diff, stdout);
  if (parsed("check")) return gpuwatch::tools::CheckCommand(o.check, stdout);
  if (parsed("merge")) return gpuwatch::tools::MergeCommand(o.merge, stdout);
  if (parsed("top")) return gpuwatch::tools::TopCommand(o.top, stdout);
  if (parsed("why")) return gpuwatch::tools::WhyCommand(o.why, stdout);
  if (parsed("exporter")) return gpuwatch::tools::ExporterCommand(o.exporter);
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
