// The man pages and shell completions gpuwatch_docgen writes at build time
// (tools/cli/), read back and checked against the command line main.cc parses
// with: every subcommand and every option the App holds, walked here with
// CLI11's own accessors (no list of names is kept in this test), appears in its
// page and in both completions; every variable of docs/configuration.md's
// table is in gpuwatch.1.
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tools/cli/cli_app.h"
#include "tools/cli/cli_doc.h"

namespace gpuwatch::tools {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  return text.str();
}

std::string ManPath(const std::string& page) {
  return std::string(GPUWATCH_TEST_SHARE_DIR) + "/man/man1/" + page + ".1";
}

// An option name as roff writes it: every '-' a minus.
std::string Roff(const std::string& text) {
  std::string out;
  for (const char c : text) out += c == '-' ? std::string("\\-") : std::string(1, c);
  return out;
}

struct Walked {
  std::string command;             // "" for the top level
  std::vector<std::string> names;  // "-o", "--output", or a positional's name
  std::string default_value;
};

class CliDocsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DefineCli(&app_, &options_, "0.0.0-test");
    WalkCommand(app_, "");
    for (CLI::App* sub : app_.get_subcommands([](CLI::App*) { return true; })) {
      subcommands_.push_back(sub->get_name());
      WalkCommand(*sub, sub->get_name());
    }
  }

  void WalkCommand(CLI::App& app, const std::string& name) {
    for (const CLI::Option* opt : app.get_options()) {
      Walked w{name, {}, opt->get_default_str()};
      for (const std::string& s : opt->get_snames()) w.names.push_back("-" + s);
      for (const std::string& l : opt->get_lnames()) w.names.push_back("--" + l);
      if (w.names.empty()) w.names.push_back(opt->get_name(true));
      walked_.push_back(w);
    }
  }

  CLI::App app_;
  CliOptions options_;
  std::vector<std::string> subcommands_;
  std::vector<Walked> walked_;
};

TEST_F(CliDocsTest, TheAppHasTheCommandsAndOptionsItIsKnownFor) {
  // The walk itself found something to check: all eight commands, and run's
  // and check's options among the rest.
  EXPECT_EQ(subcommands_.size(), 8u);
  EXPECT_GT(walked_.size(), 50u);
}

TEST_F(CliDocsTest, EveryCommandAndOptionIsInItsManPage) {
  const std::string top = ReadFile(ManPath("gpuwatch"));
  for (const std::string& sub : subcommands_) {
    EXPECT_NE(top.find(".B " + sub + "\n"), std::string::npos) << sub << " in gpuwatch.1";
    EXPECT_NE(top.find(".BR gpuwatch\\-" + sub + " (1)"), std::string::npos) << sub;
    const std::string page = ReadFile(ManPath("gpuwatch-" + sub));
    for (const char* section :
         {".SH NAME\ngpuwatch\\-", ".SH SYNOPSIS\n.B gpuwatch ", ".SH DESCRIPTION", ".SH OPTIONS",
          ".SH EXIT STATUS", ".SH ENVIRONMENT", ".SH SEE ALSO"}) {
      EXPECT_NE(page.find(section), std::string::npos) << section << " in gpuwatch-" << sub;
    }
  }
  for (const Walked& w : walked_) {
    const std::string page =
        ReadFile(ManPath(w.command.empty() ? "gpuwatch" : "gpuwatch-" + w.command));
    for (const std::string& name : w.names) {
      const std::string shown = name[0] == '-' ? "\\fB" + Roff(name) + "\\fR" : "";
      if (name[0] == '-') {
        EXPECT_NE(page.find(shown), std::string::npos) << name << " of '" << w.command << "'";
      }
    }
    if (!w.default_value.empty()) {
      EXPECT_NE(page.find("Default: \\fB" + Roff(w.default_value) + "\\fR."), std::string::npos)
          << w.names.back() << " of " << w.command << ": its default " << w.default_value;
    }
  }
}

TEST_F(CliDocsTest, EveryPositionalIsInItsManPageAndSynopsis) {
  for (const Walked& w : walked_) {
    if (w.names[0][0] == '-') continue;
    std::string upper = w.names[0];
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    const std::string page = ReadFile(ManPath("gpuwatch-" + w.command));
    const std::string synopsis = page.substr(
        page.find(".SH SYNOPSIS"), page.find(".SH DESCRIPTION") - page.find(".SH SYNOPSIS"));
    EXPECT_NE(synopsis.find("\\fI" + upper + "\\fR"), std::string::npos)
        << w.command << " " << upper;
  }
}

// The text of a subcommand's arm in the bash script ("    NAME)" to its ";;").
std::string BashArm(const std::string& script, const std::string& name) {
  const size_t start = script.find("\n    " + name + ")\n");
  if (start == std::string::npos) return "";
  return script.substr(start, script.find("\n      ;;\n", start) - start);
}

// The zsh function's arm for a subcommand ("    NAME)" to its ";;").
std::string ZshArm(const std::string& script, const std::string& name) {
  const size_t start = script.find("\n    " + name + ")\n      _arguments");
  if (start == std::string::npos) return "";
  return script.substr(start, script.find("\n      ;;\n", start) - start);
}

TEST_F(CliDocsTest, EveryCommandAndOptionIsInBothCompletions) {
  const std::string bash =
      ReadFile(std::string(GPUWATCH_TEST_SHARE_DIR) + "/bash-completion/completions/gpuwatch");
  const std::string zsh =
      ReadFile(std::string(GPUWATCH_TEST_SHARE_DIR) + "/zsh/vendor-completions/_gpuwatch");
  EXPECT_NE(bash.find("complete -F _gpuwatch gpuwatch"), std::string::npos);
  EXPECT_EQ(zsh.rfind("#compdef gpuwatch\n", 0), 0u);
  for (const std::string& sub : subcommands_) {
    EXPECT_NE(BashArm(bash, sub), "") << sub << " in the bash completion";
    EXPECT_NE(zsh.find("    '" + sub + ":"), std::string::npos) << sub << " in zsh's list";
    EXPECT_NE(ZshArm(zsh, sub), "") << sub << " in the zsh completion";
  }
  for (const Walked& w : walked_) {
    for (const std::string& name : w.names) {
      if (name[0] != '-') continue;
      const std::string b = w.command.empty() ? bash : BashArm(bash, w.command);
      const std::string z = w.command.empty() ? zsh : ZshArm(zsh, w.command);
      EXPECT_TRUE(std::regex_search(b, std::regex("[ '|]" + name + "[ '|)]")))
          << name << " of '" << w.command << "' in bash";
      EXPECT_TRUE(std::regex_search(z, std::regex("['{,*]" + name + "[[},]")))
          << name << " of '" << w.command << "' in zsh";
    }
  }
}

TEST_F(CliDocsTest, ChoicesAndPathsCompleteAsTheirOptionsSay) {
  const std::string bash =
      ReadFile(std::string(GPUWATCH_TEST_SHARE_DIR) + "/bash-completion/completions/gpuwatch");
  for (const CommandDoc& c : DescribeCli(app_)) {
    for (const OptionDoc& o : c.options) {
      if (o.names.empty() || c.name == "gpuwatch") continue;
      const std::string arm = BashArm(bash, c.name);
      size_t at = arm.find("\n        " + o.names[0]);
      if (o.kind == ValueKind::kNone) {
        EXPECT_EQ(at, std::string::npos) << o.names[0] << " is a flag: no value to complete";
        continue;
      }
      ASSERT_NE(at, std::string::npos) << o.names[0] << " of " << c.name;
      const std::string value = arm.substr(at, arm.find("return ;;", at) - at);
      if (o.kind == ValueKind::kFile) {
        EXPECT_NE(value.find("_gpuwatch_files -f"), std::string::npos) << o.names[0];
      }
      if (o.kind == ValueKind::kDir) {
        EXPECT_NE(value.find("_gpuwatch_files -d"), std::string::npos) << o.names[0];
      }
      for (const std::string& choice : o.choices) {
        EXPECT_NE(value.find(choice), std::string::npos) << choice << " of " << o.names[0];
      }
    }
  }
}

TEST_F(CliDocsTest, EveryVariableOfTheConfigurationTableIsInGpuwatch1) {
  const std::string md = ReadFile(std::string(GPUWATCH_TEST_SOURCE_DIR) + "/docs/configuration.md");
  const std::string top = ReadFile(ManPath("gpuwatch"));
  const std::regex row(R"(\n\| `([A-Z0-9_]+)` \|)");
  int count = 0;
  for (std::sregex_iterator it(md.begin(), md.end(), row), end; it != end; ++it) {
    const std::string name = (*it)[1].str();
    EXPECT_NE(top.find(".TP\n.B " + name + "\n"), std::string::npos) << name;
    ++count;
  }
  EXPECT_GE(count, 25);
  // A subcommand's page lists what it reads: report the size limit, top the
  // live directory (named by an option's help) and the idle time.
  EXPECT_NE(ReadFile(ManPath("gpuwatch-report")).find(".B GPUWATCH_REPORT_MAX_BYTES"),
            std::string::npos);
  const std::string top_page = ReadFile(ManPath("gpuwatch-top"));
  EXPECT_NE(top_page.find(".B GPUWATCH_LIVE_DIR"), std::string::npos);
  EXPECT_NE(top_page.find(".B GPUWATCH_IDLE_SECONDS"), std::string::npos);
  EXPECT_EQ(top_page.find(".B GPUWATCH_DEPTH"), std::string::npos);
}

// An option added to the App is in what the generators read, with its help,
// value and kind, with no change to them.
TEST_F(CliDocsTest, AnOptionAddedToTheAppIsDescribed) {
  std::vector<std::string> fns;
  app_.get_subcommand("run")
      ->add_option("--made-up-fn", fns, "Functions to skip")
      ->type_name("FILE");
  const std::vector<CommandDoc> docs = DescribeCli(app_);
  bool found = false;
  for (const CommandDoc& c : docs) {
    for (const OptionDoc& o : c.options) {
      if (c.name != "run" || o.names != std::vector<std::string>{"--made-up-fn"}) continue;
      found = true;
      EXPECT_EQ(o.help, "Functions to skip");
      EXPECT_EQ(o.value, "FILE");
      EXPECT_EQ(o.kind, ValueKind::kFile);
      EXPECT_TRUE(o.repeatable);
    }
  }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace gpuwatch::tools
