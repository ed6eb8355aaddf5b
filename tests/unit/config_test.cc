#include "libgpuwatch/base/config.h"

#include <gtest/gtest.h>

#include <csignal>
#include <fstream>
#include <map>
#include <regex>
#include <string>

namespace gpuwatch {
namespace {

struct Env {
  std::map<std::string, std::string> vars;
  EnvLookup Lookup() const {
    return [this](const char* name) -> const char* {
      auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  }
  std::vector<std::string> Names() const {
    std::vector<std::string> names;
    for (const auto& [k, v] : vars) names.push_back(k);
    return names;
  }
};

Config Parse(const Env& env, std::vector<std::string>* warnings) {
  return ParseConfig(env.Lookup(), env.Names(), warnings);
}

TEST(Config, DefaultsWhenNothingIsSet) {
  std::vector<std::string> warnings;
  const Config c = Parse(Env{}, &warnings);
  EXPECT_TRUE(warnings.empty());
  EXPECT_FALSE(c.disabled);
  EXPECT_EQ(c.output, "gpuwatch.%p.json");
  EXPECT_EQ(c.depth, 32);
  EXPECT_EQ(c.snapshot_signal, SIGUSR2);
  EXPECT_TRUE(c.summary);
}

TEST(Config, ValidValuesAreTaken) {
  Env env{{{"GPUWATCH_DEPTH", "8"},
           {"GPUWATCH_SIGNAL", "SIGUSR1"},
           {"GPUWATCH_OUTPUT", "/tmp/r.%r.json"},
           {"GPUWATCH_SUMMARY", "off"},
           {"GPUWATCH_DISABLE", "1"}}};
  std::vector<std::string> warnings;
  const Config c = Parse(env, &warnings);
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(c.depth, 8);
  EXPECT_EQ(c.snapshot_signal, SIGUSR1);
  EXPECT_EQ(c.output, "/tmp/r.%r.json");
  EXPECT_FALSE(c.summary);
  EXPECT_TRUE(c.disabled);
}

TEST(Config, EachBadValueGetsOneWarningNamingVariableValueAndDefault) {
  Env env{
      {{"GPUWATCH_DEPTH", "999"}, {"GPUWATCH_SIGNAL", "SIGSEGV"}, {"GPUWATCH_SUMMARY", "maybe"}}};
  std::vector<std::string> warnings;
  const Config c = Parse(env, &warnings);
  ASSERT_EQ(warnings.size(), 3u);
  EXPECT_EQ(warnings[0],
            "ignoring GPUWATCH_DEPTH=\"999\" (expected an integer from 0 to 128); using 32");
  EXPECT_NE(warnings[1].find("GPUWATCH_SIGNAL=\"SIGSEGV\""), std::string::npos);
  EXPECT_NE(warnings[1].find("using SIGUSR2"), std::string::npos);
  EXPECT_NE(warnings[2].find("GPUWATCH_SUMMARY=\"maybe\""), std::string::npos);
  EXPECT_EQ(c.depth, 32);
  EXPECT_EQ(c.snapshot_signal, SIGUSR2);
  EXPECT_TRUE(c.summary);
}

TEST(Config, MisspelledVariableIsFlagged) {
  Env env{{{"GPUWATCH_DEPHT", "8"}}};
  std::vector<std::string> warnings;
  Parse(env, &warnings);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0], "unknown variable GPUWATCH_DEPHT ignored");
}

// A variable in configuration.md's table, set in a profiled process's
// environment (a shell's, for the gpuwatch command), draws no "unknown" warning.
TEST(Config, EveryDocumentedVariableIsKnown) {
  std::ifstream doc(std::string(GPUWATCH_TEST_SOURCE_DIR) + "/docs/configuration.md");
  ASSERT_TRUE(doc) << "docs/configuration.md";
  const std::regex row("^\\| `(GPUWATCH_[A-Z0-9_]+)` \\|");
  Env env;
  for (std::string line; std::getline(doc, line);) {
    std::smatch m;
    if (std::regex_search(line, m, row)) env.vars[m[1]] = "";
  }
  ASSERT_GE(env.vars.size(), 20u);
  std::vector<std::string> warnings;
  Parse(env, &warnings);
  for (const std::string& w : warnings)
    EXPECT_EQ(w.find("unknown variable"), std::string::npos) << w;
}

TEST(Config, SignalsByNameAndNumber) {
  EXPECT_EQ(ParseSignal("USR2"), SIGUSR2);
  EXPECT_EQ(ParseSignal("SIGHUP"), SIGHUP);
  EXPECT_EQ(ParseSignal("10"), 10);
  EXPECT_EQ(ParseSignal("off"), 0);
  EXPECT_EQ(ParseSignal("SIGKILL"), -1);
  EXPECT_EQ(ParseSignal("9"), -1);
  // By number as by name: SIGTERM and SIGINT are the host's.
  EXPECT_EQ(ParseSignal("15"), -1);
  EXPECT_EQ(ParseSignal("SIGTERM"), -1);
  EXPECT_EQ(ParseSignal("2"), -1);
  EXPECT_EQ(ParseSignal(std::to_string(SIGRTMIN + 1)), SIGRTMIN + 1);
  EXPECT_EQ(ParseSignal("bogus"), -1);
  EXPECT_EQ(ParseSignal(""), -1);
}

TEST(Config, OutputPatternExpansion) {
  EXPECT_EQ(ExpandOutputPattern("gw.%p.json", 42, "node1", ""), "gw.42.json");
  EXPECT_EQ(ExpandOutputPattern("%h/%r-%p%%.json", 7, "node1", "3"), "node1/3-7%.json");
  EXPECT_EQ(ExpandOutputPattern("a%zb%", 1, "h", ""), "a%zb%");
  EXPECT_EQ(ExpandOutputPattern("r%r", 1, "h", ""), "r0");
}

TEST(Config, DefaultOutputCarriesTheRankInAJobWithRanks) {
  std::vector<std::string> warnings;
  EXPECT_EQ(Parse(Env{{{"RANK", "3"}}}, &warnings).output, "gpuwatch.rank%r.%p.json");
  EXPECT_EQ(Parse(Env{{{"SLURM_PROCID", "1"}}}, &warnings).output, "gpuwatch.rank%r.%p.json");
  EXPECT_EQ(Parse(Env{{{"RANK", "3"}, {"GPUWATCH_OUTPUT", "r.json"}}}, &warnings).output, "r.json");
  EXPECT_TRUE(warnings.empty());
}

TEST(Config, RankComesFromTheFirstLauncherVariableSet) {
  Env env{{{"OMPI_COMM_WORLD_RANK", "5"}, {"SLURM_PROCID", "9"}}};
  EXPECT_EQ(RankFromEnvironment(env.Lookup()), "5");
  env.vars["RANK"] = "2";
  EXPECT_EQ(RankFromEnvironment(env.Lookup()), "2");
  EXPECT_EQ(RankFromEnvironment(Env{}.Lookup()), "");
}

TEST(Config, PythonFramesAreOnByDefaultAndCanBeTurnedOff) {
  std::vector<std::string> warnings;
  EXPECT_TRUE(Parse(Env{}, &warnings).python);
  EXPECT_FALSE(Parse(Env{{{"GPUWATCH_PYTHON", "0"}}}, &warnings).python);
  EXPECT_TRUE(warnings.empty());
  EXPECT_TRUE(Parse(Env{{{"GPUWATCH_PYTHON", "native"}}}, &warnings).python);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0], "ignoring GPUWATCH_PYTHON=\"native\" (expected 0 or 1); using 1");
}

TEST(Config, NvtxIsOnUnlessSwitchedOff) {
  for (const char* off : {"0", "false", "no", "off"}) EXPECT_TRUE(NvtxSwitchedOff(off)) << off;
  for (const char* on : {"1", "on", "", "maybe"}) EXPECT_FALSE(NvtxSwitchedOff(on)) << on;
  EXPECT_FALSE(NvtxSwitchedOff(nullptr));
  std::vector<std::string> warnings;
  // The variable gpuwatch sets for the NVTX tool it chains to is its own.
  const Config off = Parse(
      Env{{{"GPUWATCH_NVTX", "0"}, {"GPUWATCH_NVTX_CHAIN", "/opt/nsight/libtool.so"}}}, &warnings);
  EXPECT_FALSE(off.nvtx);
  EXPECT_TRUE(warnings.empty()) << warnings[0];
  EXPECT_TRUE(Parse(Env{{{"GPUWATCH_NVTX", "maybe"}}}, &warnings).nvtx);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0], "ignoring GPUWATCH_NVTX=\"maybe\" (expected 0 or 1); using 1");
}

TEST(Config, UnwindPicksTheCfiWalkerOrLibunwind) {
  std::vector<std::string> warnings;
  EXPECT_TRUE(Parse(Env{}, &warnings).cfi_unwind);
  EXPECT_FALSE(Parse(Env{{{"GPUWATCH_UNWIND", "libunwind"}}}, &warnings).cfi_unwind);
  EXPECT_TRUE(Parse(Env{{{"GPUWATCH_UNWIND", "cfi"}}}, &warnings).cfi_unwind);
  EXPECT_TRUE(warnings.empty());
  EXPECT_TRUE(Parse(Env{{{"GPUWATCH_UNWIND", "frame-pointers"}}}, &warnings).cfi_unwind);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0],
            "ignoring GPUWATCH_UNWIND=\"frame-pointers\" (expected cfi or libunwind); using cfi");
}

TEST(Config, CheckpointSecondsDefaultsToFiveAndZeroTurnsThemOff) {
  std::vector<std::string> warnings;
  EXPECT_EQ(Parse(Env{}, &warnings).checkpoint_seconds, 5);
  EXPECT_EQ(Parse(Env{{{"GPUWATCH_CHECKPOINT_SECONDS", "0"}}}, &warnings).checkpoint_seconds, 0);
  EXPECT_EQ(Parse(Env{{{"GPUWATCH_CHECKPOINT_SECONDS", "30"}}}, &warnings).checkpoint_seconds, 30);
  EXPECT_TRUE(warnings.empty());
  for (const char* bad : {"-1", "1.5", "soon", "86401", ""}) {
    warnings.clear();
    EXPECT_EQ(Parse(Env{{{"GPUWATCH_CHECKPOINT_SECONDS", bad}}}, &warnings).checkpoint_seconds, 5);
    ASSERT_EQ(warnings.size(), 1u) << bad;
    EXPECT_EQ(warnings[0], std::string("ignoring GPUWATCH_CHECKPOINT_SECONDS=\"") + bad +
                               "\" (expected seconds from 0 (off) to 86400); using 5");
  }
}

TEST(Config, AllocFnIsACommaSeparatedListOfNames) {
  std::vector<std::string> warnings;
  Env env;
  EXPECT_TRUE(Parse(env, &warnings).alloc_fns.empty());
  env.vars["GPUWATCH_ALLOC_FN"] = " Alloc, ,ns::Pool::Get*,Alloc(unsigned long) ";
  const Config c = Parse(env, &warnings);
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(c.alloc_fns,
            (std::vector<std::string>{"Alloc", "ns::Pool::Get*", "Alloc(unsigned long)"}));
}

}  // namespace
}  // namespace gpuwatch
