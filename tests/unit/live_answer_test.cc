// What a broken or hostile process can send `gpuwatch top` and `gpuwatch
// exporter` (tools/live/live_answer.h): each answer is refused with one line, or
// read into typed values; what a terminal would act on is shown, not sent;
// no answer makes the exporter print one label set twice.
#include "tools/live/live_answer.h"

#include <gtest/gtest.h>

#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "prometheus/text_serializer.h"
#include "tools/commands/top_command.h"
#include "tools/live/live_client.h"
#include "tools/live/live_growth.h"
#include "tools/live/live_metrics.h"

namespace gpuwatch::tools {
namespace {

std::string Refused(const std::string& text) {
  LiveState state;
  std::string problem;
  if (ParseLiveAnswer(text, &state, &problem)) return "(read)";
  return problem;
}

TEST(LiveAnswer, AHostileAnswerIsOneLineNeverAnException) {
  EXPECT_EQ(Refused(R"({"schema":1})"), "not a gpuwatch live state (12 bytes)");
  EXPECT_EQ(Refused(""), "not a gpuwatch live state (0 bytes)");
  EXPECT_EQ(Refused("[1,2]"), "not a gpuwatch live state (5 bytes)");
  EXPECT_EQ(Refused(R"({"schema":"gpuwatch-live","version":2})"),
            "a live state of another version (this gpuwatch reads version 1)");
  // 200,000 nested arrays: refused on the text, before anything recurses.
  const std::string deep =
      R"({"error":)" + std::string(200000, '[') + std::string(200000, ']') + "}";
  EXPECT_EQ(Refused(deep), "nested deeper than 64 levels (at byte 72)");
  EXPECT_EQ(Refused(std::string(kMaxLiveAnswerBytes + 1, ' ')), "an answer of more than 16 MiB");
  // Each field of the wrong type names itself.
  const std::string head = R"({"schema":"gpuwatch-live","version":1,)";
  EXPECT_EQ(Refused(head + R"("rank":5})"), "rank is 5, expected a string");
  EXPECT_EQ(Refused(head + R"("command":["a",7]})"), "command[1] is 7, expected a string");
  EXPECT_EQ(Refused(head + R"("device":{"live_bytes":-1}})"),
            "device.live_bytes is -1, expected a count (not negative)");
  EXPECT_EQ(Refused(head + R"("sites":[{"live_bytes":"x"}]})"),
            "sites[0].live_bytes is \"x\", expected a count (an integer)");
  EXPECT_EQ(Refused(head + R"("sites":[{"history":[1,[2]]}]})"),
            "sites[0].history[1] is an array, expected a count (an integer)");
  EXPECT_EQ(Refused(head + R"("sites":[7]})"), "sites[0] is 7, expected an object");
  EXPECT_EQ(Refused(head + R"("rates":{"device_bytes_per_min":1e300}})"),
            "rates.device_bytes_per_min is 1e+300, expected a number of at most 2^53");
  EXPECT_EQ(Refused(head + R"("kinds":{"device":[]}})"),
            "kinds.device is an array, expected an object");
  // What the process says of itself, shown, not obeyed.
  EXPECT_EQ(Refused(R"({"error":"\u001b[2Jgone"})"), "the process says: \\x1b[2Jgone");
}

TEST(LiveAnswer, AnHonestAnswerIsReadExactly) {
  LiveState s;
  std::string problem;
  ASSERT_TRUE(ParseLiveAnswer(R"({"schema":"gpuwatch-live","version":1,"pid":9,"rank":"2",
      "command":["/bin/x","-a"],"started_unix_ms":1700000000000,"uptime_ns":5,
      "device":{"live_bytes":3,"peak_bytes":4,"live_count":1},
      "devices":[{"device":1,"live_bytes":3,"peak_bytes":4,"total_bytes":null}],
      "counters":{"allocs":6,"ooms":2},"rates":{"device_bytes_per_min":-7.5,"h2d_bytes_per_s":null},
      "marks":8,"sites":[{"site":3,"location":"a.cu:1","live_bytes":3,"growth_per_min":null,
      "growth_per_mark":-2,"history":[null,1,3]}],"other_sites":{"count":1,"live_bytes":10},
      "future_field":{"deep":[1]}})",
                              &s, &problem))
      << problem;
  EXPECT_EQ(s.rank, "2");
  EXPECT_EQ(s.command, (std::vector<std::string>{"/bin/x", "-a"}));
  EXPECT_EQ(s.started_unix_ms, 1700000000000u);
  EXPECT_EQ(s.live_bytes, 3u);
  ASSERT_EQ(s.devices.size(), 1u);
  EXPECT_EQ(s.devices[0].device, 1u);
  EXPECT_FALSE(s.devices[0].total_bytes.has_value());
  EXPECT_EQ(s.allocs, 6u);
  EXPECT_EQ(s.ooms, 2u);
  EXPECT_EQ(s.device_bytes_per_min, -7.5);
  EXPECT_FALSE(s.h2d_bytes_per_s.has_value());
  EXPECT_FALSE(s.d2h_bytes_per_s.has_value());
  ASSERT_EQ(s.sites.size(), 1u);
  EXPECT_FALSE(s.sites[0].growth_per_min.has_value());
  EXPECT_EQ(s.sites[0].growth_per_mark, -2.0);
  EXPECT_EQ(s.sites[0].history, (std::vector<std::optional<uint64_t>>{std::nullopt, 1, 3}));
  EXPECT_EQ(s.other_count, 1u);
  EXPECT_EQ(s.other_bytes, 10u);
}

TEST(LiveAnswer, WhatATerminalWouldActOnIsShown) {
  EXPECT_EQ(Printable("a\x1b[2Jb\nc\x07"), "a\\x1b[2Jb\\x0ac\\x07");
  EXPECT_EQ(Printable("\x7f"), "\\x7f");
  EXPECT_EQ(Printable("\xc2\x9b"
                      "31m"),
            "\\x9b31m");  // CSI as a C1 control
  EXPECT_EQ(Printable("ab\xe2\x80\xae"
                      "cd"),
            "ab\\u202ecd");                        // right-to-left override
  EXPECT_EQ(Printable("\xff\xc3"), "\\xff\\xc3");  // not UTF-8
  EXPECT_EQ(Printable("caf\xc3\xa9 \xe2\x96\x81"), "caf\xc3\xa9 \xe2\x96\x81");
  // Cut on whole escapes and characters.
  EXPECT_EQ(Printable("ab\x1b", 5), "ab");
  EXPECT_EQ(Printable("a\xc3\xa9", 2), "a");
}

LiveProcess Process(pid_t pid, const std::string& json_text) {
  LiveProcess p;
  p.pid = pid;
  std::string problem;
  EXPECT_TRUE(ParseLiveAnswer(json_text, &p.state, &problem)) << problem;
  return p;
}

// A process that repeats a device, a direction and calls a site "other":
// Prometheus refuses a whole scrape that has one label set twice.
TEST(LiveMetrics, NoLabelSetIsExposedTwice) {
  LiveScan scan;
  scan.processes.push_back(Process(5, R"({"schema":"gpuwatch-live","command":["x"],
      "devices":[{"device":0,"live_bytes":1},{"device":0,"live_bytes":2}],
      "transfers":[{"direction":"h2d","host":"pinned","bytes":3},
                   {"direction":"h2d","host":"pinned","bytes":4}],
      "sites":[{"location":"other","live_bytes":5},{"location":"a.cu:1","live_bytes":6}],
      "other_sites":{"count":2,"live_bytes":7}})"));
  const std::string text = prometheus::TextSerializer().Serialize(LiveMetrics(scan, {.top = 20}));
  const std::string labels = R"(pid="5",command="x",rank="",host="")";
  const auto count = [&text](const std::string& series) {
    size_t n = 0;
    for (size_t at = text.find(series); at != std::string::npos; at = text.find(series, at + 1)) {
      ++n;
    }
    return n;
  };
  EXPECT_EQ(count("gpuwatch_device_memory_live_bytes{" + labels + R"(,device="0"} 1)" + "\n"), 1u)
      << text;
  EXPECT_EQ(count("gpuwatch_device_memory_live_bytes{"), 1u) << text;
  EXPECT_EQ(count("gpuwatch_transfer_bytes_total{" + labels +
                  R"(,direction="h2d",host_memory="pinned"} 3)" + "\n"),
            1u)
      << text;
  EXPECT_EQ(count("gpuwatch_transfer_bytes_total{"), 1u) << text;
  // The site that calls itself "other" is counted in "other": 7 + 5.
  EXPECT_EQ(count("gpuwatch_site_live_bytes{" + labels + R"(,site="other"} 12)" + "\n"), 1u)
      << text;
  EXPECT_EQ(count("gpuwatch_site_live_bytes{"), 2u) << text;
}

// Control characters in a command line or a function name are shown as
// \xNN in `gpuwatch top`, never sent to the terminal; the table keeps its
// rows.
TEST(TopFrame, ControlCharactersAreShownNotSent) {
  LiveScan scan;
  scan.processes.push_back(Process(
      42,
      R"({"schema":"gpuwatch-live","rank":"\u001b[1m","command":["/bin/evil\u001b]0;owned\u0007","a\nb"],
      "device":{"live_bytes":1048576},
      "sites":[{"location":"x.cu:1\u009b2J","function":"f\u001b[2J","live_bytes":1048576}]})"));
  scan.problems.push_back("pid 7: \x1b[31mred");
  TopView view;
  view.width = 160;
  view.sites = 5;
  view.clock = "10:00:00";
  const std::vector<std::string> lines = RenderTopFrame(scan, view);
  for (const std::string& l : lines) {
    for (const char c : l) {
      EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20 || c == 0x7f) << l;
    }
  }
  ASSERT_GE(lines.size(), 6u);
  EXPECT_NE(lines[2].find("    42 \\x1b evil\\x1b]0;owned\\x07 a\\x0ab "), std::string::npos)
      << lines[2];
  EXPECT_NE(lines[2].find("   1.0M"), std::string::npos) << lines[2];
  bool site = false;
  bool problem = false;
  for (const std::string& l : lines) {
    site = site || l.find("x.cu:1\\x9b2J (f\\x1b[2J)") != std::string::npos;
    problem = problem || l == "pid 7: \\x1b[31mred";
  }
  EXPECT_TRUE(site);
  EXPECT_TRUE(problem);
}

// Growth is a sustained rise (issue 36, friction 7): a step (a one-time
// allocation) is not growth, a leak is, at its own rate even after a step.
TEST(LiveGrowth, AStepIsNotGrowthALeakIs) {
  constexpr uint64_t kMiB = 1 << 20;
  std::vector<std::optional<uint64_t>> step;
  std::vector<std::optional<uint64_t>> leak;
  std::vector<std::optional<uint64_t>> step_then_leak;
  std::vector<std::optional<uint64_t>> sawtooth;
  std::vector<std::optional<uint64_t>> falling;
  for (uint64_t i = 0; i < 15; ++i) {
    step.emplace_back(i < 3 ? 0 : 64 * kMiB);
    leak.emplace_back(i * kMiB);
    step_then_leak.emplace_back(i < 2 ? 0 : 64 * kMiB + i * kMiB);
    sawtooth.emplace_back(i % 2 == 0 ? 0 : 8 * kMiB);
    falling.emplace_back((15 - i) * kMiB);
  }
  EXPECT_EQ(SustainedGrowthPerMin(step, 1000), 0.0);
  EXPECT_EQ(SustainedGrowthPerMin(leak, 1000), 60.0 * kMiB);
  EXPECT_EQ(SustainedGrowthPerMin(step_then_leak, 1000), 60.0 * kMiB);
  EXPECT_EQ(SustainedGrowthPerMin(sawtooth, 1000), 0.0);
  EXPECT_EQ(SustainedGrowthPerMin(falling, 1000), -60.0 * kMiB);
  // Every other second unknown: the known samples, at their own times.
  std::vector<std::optional<uint64_t>> gaps = leak;
  for (size_t i = 1; i < gaps.size(); i += 2) gaps[i] = std::nullopt;
  EXPECT_EQ(SustainedGrowthPerMin(gaps, 1000), 60.0 * kMiB);
  // Under 5 s of history, or no interval: unknown.
  EXPECT_EQ(SustainedGrowthPerMin({1, 2, 3, 4, 5}, 1000), std::nullopt);
  EXPECT_EQ(SustainedGrowthPerMin(leak, 0), std::nullopt);
}

// `gpuwatch top --sort growth` ranks a leak above a one-time 64 MiB
// allocation made 12 s ago, which shows no growth (it showed +274M/min, the
// window's difference, during its first minute).
TEST(TopFrame, SortByGrowthRanksALeakAboveAOneTimeAllocation) {
  std::string step;
  std::string leak;
  std::string device;
  for (uint64_t i = 0; i < 15; ++i) {
    const uint64_t load = i < 3 ? 0 : 64 << 20;
    const uint64_t kept = i << 20;
    step += (i == 0 ? "" : ",") + std::to_string(load);
    leak += (i == 0 ? "" : ",") + std::to_string(kept);
    device += (i == 0 ? "" : ",") + std::to_string(load + kept);
  }
  LiveScan scan;
  scan.processes.push_back(
      Process(42, R"({"schema":"gpuwatch-live","version":1,"command":["train.py"],
      "device":{"live_bytes":81788928,"peak_bytes":81788928},
      "rates":{"window_ns":14000000000,"device_bytes_per_min":350513737},
      "history":{"interval_ms":1000,"device_bytes":[)" +
                      device + R"(]},
      "sites":[{"location":"model.py:10","function":"load","live_bytes":67108864,
                "growth_per_min":287603492,"history":[)" +
                      step + R"(]},
               {"location":"train.py:52","function":"step","live_bytes":14680064,
                "growth_per_min":62914560,"history":[)" +
                      leak + R"(]}]})"));
  TopView view;
  view.width = 100;
  view.sites = 5;
  view.sort = "growth";
  view.clock = "10:00:00";
  const std::vector<std::string> lines = RenderTopFrame(scan, view);
  std::vector<std::string> sites;
  std::string process;
  for (const std::string& l : lines) {
    if (l.find("model.py:10") != std::string::npos || l.find("train.py:52") != std::string::npos) {
      std::istringstream words(l);
      std::string live;
      std::string growth;
      words >> live >> growth;
      sites.push_back(live + " " + growth + " " + l.substr(l.rfind("  ") + 2));
    }
    if (l.rfind(">     42", 0) == 0) process = l;
  }
  EXPECT_EQ(sites,
            (std::vector<std::string>{"14M +60M train.py:52 (step)", "64M 0 model.py:10 (load)"}));
  // The process: the leak's rate, not the step's.
  EXPECT_NE(process.find("   +60M "), std::string::npos) << process;
}

}  // namespace
}  // namespace gpuwatch::tools
