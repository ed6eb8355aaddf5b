// gpuwatch_docgen: writes the man pages and shell completions of `gpuwatch`
// from the definition its main.cc parses with (cli_app.cc), at build time:
//
//   gpuwatch_docgen VERSION CONFIGURATION_MD PREFIX
//
// writes, where an install puts them under PREFIX: share/man/man1/gpuwatch.1
// and gpuwatch-SUB.1 for each subcommand, share/bash-completion/completions/gpuwatch
// and share/zsh/vendor-completions/_gpuwatch. CONFIGURATION_MD is docs/configuration.md, whose
// table of variables becomes the pages' ENVIRONMENT. Exit status 0, or 1 with one line on stderr.
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tools/cli/cli_app.h"
#include "tools/cli/cli_doc.h"
#include "tools/cli/completion.h"
#include "tools/cli/man_page.h"

namespace {

bool Write(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) std::fprintf(stderr, "gpuwatch_docgen: cannot write %s\n", path.c_str());
  return static_cast<bool>(out);
}

int Generate(const std::string& version, const std::string& config_md, const std::string& prefix) {
  std::ifstream in(config_md, std::ios::binary);
  std::stringstream markdown;
  markdown << in.rdbuf();
  if (!in) {
    std::fprintf(stderr, "gpuwatch_docgen: cannot read %s\n", config_md.c_str());
    return 1;
  }
  const std::vector<gpuwatch::tools::EnvDoc> env = gpuwatch::tools::ReadEnvTable(markdown.str());
  if (env.empty()) {
    std::fprintf(stderr, "gpuwatch_docgen: no table of variables in %s\n", config_md.c_str());
    return 1;
  }
  CLI::App app;
  gpuwatch::tools::CliOptions options;
  gpuwatch::tools::DefineCli(&app, &options, version);
  const std::vector<gpuwatch::tools::CommandDoc> commands = gpuwatch::tools::DescribeCli(app);

  const std::filesystem::path share = std::filesystem::path(prefix) / "share";
  const std::filesystem::path man = share / "man" / "man1";
  const std::filesystem::path bash = share / "bash-completion" / "completions";
  const std::filesystem::path zsh = share / "zsh" / "vendor-completions";
  for (const auto& dir : {man, bash, zsh}) std::filesystem::create_directories(dir);
  bool ok = true;
  for (size_t i = 0; i < commands.size(); ++i) {
    ok = Write(man / (gpuwatch::tools::ManPageName(commands, i) + ".1"),
               gpuwatch::tools::ManPage(commands, i, env, version)) &&
         ok;
  }
  ok = Write(bash / "gpuwatch", gpuwatch::tools::BashCompletion(commands)) && ok;
  ok = Write(zsh / "_gpuwatch", gpuwatch::tools::ZshCompletion(commands)) && ok;
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: gpuwatch_docgen VERSION CONFIGURATION_MD PREFIX\n");
    return 1;
  }
  try {
    return Generate(argv[1], argv[2], argv[3]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpuwatch_docgen: %s\n", e.what());
    return 1;
  }
}
