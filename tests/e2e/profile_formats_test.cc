// End-to-end tests of the profile formats of `gpuwatch report` on a report of
// leak_sites run on the CUDA simulator: the pprof profile (gunzipped and
// decoded with the generated perftools.profiles classes) and the collapsed
// stacks, each summed against the report's own figures.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdint>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/e2e/common.h"
#include "tools/pprof/profile.pb.h"

namespace gpuwatch::testing {
namespace {

using nlohmann::json;
namespace pb = perftools::profiles;

constexpr int64_t kMiB = 1024 * 1024;

// leak_sites under `gpuwatch run`: device memory of five kinds and pinned
// host memory leaked, one site allocating and freeing (Balanced).
class ProfileFormats : public ::testing::Test {
 protected:
  void SetUp() override {
    report_path_ = dir_.path() + "/leak_sites.json";
    const ProcessResult r = RunProcess({kCli, "run", "--no-summary", "--sample-ms", "0", "-o",
                                        report_path_, "--", kPrograms + "/leak_sites"},
                                       SimEnv(), dir_.path());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    report_ = ReadJson(report_path_);
    ASSERT_TRUE(report_.is_object()) << r.err;
    // Every site is listed: the sums below are over all of them.
    ASSERT_EQ(report_["leaks"]["device"]["omitted_bytes"], 0);
    ASSERT_EQ(report_["leaks"]["host"]["omitted_bytes"], 0);
  }

  ProcessResult Cli(std::vector<std::string> args) {
    args.insert(args.begin(), kCli);
    return RunProcess(args, {}, dir_.path());
  }

  ScopedTempDir dir_;
  std::string report_path_;
  json report_;
};

std::string Gunzip(const std::string& gz) {
  z_stream z{};
  EXPECT_EQ(inflateInit2(&z, 15 + 16), Z_OK);  // gzip wrapper only
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data()));
  z.avail_in = static_cast<uInt>(gz.size());
  std::string out;
  char buf[16384];
  int rc = Z_OK;
  while (rc == Z_OK) {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof(buf);
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(buf, sizeof(buf) - z.avail_out);
  }
  inflateEnd(&z);
  EXPECT_EQ(rc, Z_STREAM_END) << "not a complete gzip stream";
  return out;
}

// The function name, file and line of the innermost line of `location_id`.
struct Leaf {
  std::string function;
  std::string file;
  int64_t line = 0;
};
Leaf LeafOf(const pb::Profile& p, uint64_t location_id) {
  for (const pb::Location& loc : p.location()) {
    if (loc.id() != location_id || loc.line_size() == 0) continue;
    for (const pb::Function& fn : p.function()) {
      if (fn.id() == loc.line(0).function_id()) {
        return {p.string_table(fn.name()), p.string_table(fn.filename()), loc.line(0).line()};
      }
    }
  }
  return {};
}

TEST_F(ProfileFormats, PprofSumsEqualTheReportAndTheLeakHasItsFileAndLine) {
  const std::string out = dir_.path() + "/leak_sites.pb.gz";
  const ProcessResult r = Cli({"report", report_path_, "--format", "pprof", "-o", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  pb::Profile p;
  ASSERT_TRUE(p.ParseFromString(Gunzip(ReadFile(out))));

  ASSERT_GT(p.string_table_size(), 0);
  EXPECT_EQ(p.string_table(0), "");
  const std::vector<std::pair<std::string, std::string>> types = {{"live_space", "bytes"},
                                                                  {"live_objects", "count"},
                                                                  {"alloc_space", "bytes"},
                                                                  {"alloc_objects", "count"}};
  ASSERT_EQ(p.sample_type_size(), 4);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(p.string_table(p.sample_type(i).type()), types[i].first);
    EXPECT_EQ(p.string_table(p.sample_type(i).unit()), types[i].second);
  }
  EXPECT_EQ(p.string_table(p.default_sample_type()), "live_space");

  int64_t sums[4] = {0, 0, 0, 0};
  for (const pb::Sample& s : p.sample()) {
    ASSERT_EQ(s.value_size(), 4);
    for (int i = 0; i < 4; ++i) sums[i] += s.value(i);
  }
  const json& device = report_["leaks"]["device"];
  const json& host = report_["leaks"]["host"];
  // Both sections hold something, so the sum checks that both were read.
  ASSERT_GT(device["bytes"].get<int64_t>(), 0);
  ASSERT_EQ(host["bytes"].get<int64_t>(), 96 * 1024);
  EXPECT_EQ(sums[0], device["bytes"].get<int64_t>() + host["bytes"].get<int64_t>());
  EXPECT_EQ(sums[1], device["count"].get<int64_t>() + host["count"].get<int64_t>());
  int64_t alloc_bytes = 0;
  int64_t allocs = 0;
  for (const json& site : report_["sites"]) {
    alloc_bytes += site["alloc_bytes"].get<int64_t>();
    allocs += site["allocs"].get<int64_t>();
  }
  EXPECT_EQ(sums[2], alloc_bytes);
  EXPECT_EQ(sums[3], allocs);

  // One sample per site: leaks and allocations of a site are in one sample.
  EXPECT_EQ(static_cast<size_t>(p.sample_size()), report_["sites"].size());

  const std::string source = kSourceDir + "/tests/e2e/programs/leak_sites.cu";
  bool found_leak = false;
  bool found_balanced = false;
  for (const pb::Sample& s : p.sample()) {
    ASSERT_GT(s.location_id_size(), 0);
    const Leaf leaf = LeafOf(p, s.location_id(0));
    if (leaf.function.find("LeakDevice") != std::string::npos) {
      found_leak = true;
      EXPECT_EQ(s.value(0), 6 * kMiB);  // two cudaMalloc(3 MiB)
      EXPECT_EQ(s.value(1), 2);
      EXPECT_EQ(s.value(2), 6 * kMiB);
      EXPECT_EQ(s.value(3), 2);
      EXPECT_EQ(leaf.file, source);
      EXPECT_EQ(leaf.line, LineOf(source, "// LEAK:device"));
    }
    if (leaf.function.find("Balanced") != std::string::npos) {
      // Allocated and freed: in `sites` only, so no live figures.
      found_balanced = true;
      EXPECT_EQ(s.value(0), 0);
      EXPECT_EQ(s.value(1), 0);
      EXPECT_EQ(s.value(2), 15 * kMiB);
      EXPECT_EQ(s.value(3), 3);
      EXPECT_EQ(leaf.line, LineOf(source, "// balanced: freed below"));
    }
  }
  EXPECT_TRUE(found_leak);
  EXPECT_TRUE(found_balanced);

  // Every id a sample or location names exists.
  std::map<uint64_t, int> locations;
  std::map<uint64_t, int> mappings;
  for (const pb::Location& loc : p.location()) ++locations[loc.id()];
  for (const pb::Mapping& m : p.mapping()) ++mappings[m.id()];
  for (const pb::Sample& s : p.sample()) {
    for (const uint64_t id : s.location_id()) EXPECT_EQ(locations[id], 1) << id;
  }
  for (const pb::Location& loc : p.location()) {
    if (loc.mapping_id() != 0) {
      EXPECT_EQ(mappings[loc.mapping_id()], 1);
    }
  }
  // leak_sites itself is a mapping, with the functions' names and lines.
  bool program_mapped = false;
  for (const pb::Mapping& m : p.mapping()) {
    if (p.string_table(m.filename()) == kPrograms + "/leak_sites") {
      program_mapped = m.has_functions() && m.has_filenames() && m.has_line_numbers();
    }
  }
  EXPECT_TRUE(program_mapped);
}

TEST_F(ProfileFormats, PprofGoesToAPipeButNotToATerminal) {
  const std::string file = dir_.path() + "/a.pb.gz";
  ASSERT_EQ(Cli({"report", report_path_, "--format", "pprof", "-o", file}).exit_code, 0);
  const ProcessResult piped = Cli({"report", report_path_, "--format", "pprof"});
  EXPECT_EQ(piped.exit_code, 0) << piped.err;
  EXPECT_EQ(piped.out, ReadFile(file));

  // script(1) runs the command with a terminal as its stdout.
  const ProcessResult tty = RunProcess(
      {"script", "-qec", kCli + " report " + report_path_ + " --format pprof", "/dev/null"}, {},
      dir_.path());
  if (tty.exit_code == 127) GTEST_SKIP() << "script(1) is not installed";
  EXPECT_EQ(tty.exit_code, 2) << tty.out << tty.err;
  EXPECT_NE(tty.out.find("--format pprof is binary; write it to a file with -o FILE"),
            std::string::npos)
      << tty.out;
  EXPECT_EQ(tty.out.find('\x1f'), std::string::npos);  // no gzip magic on the terminal
}

// Collapsed stacks: "frame;frame;... WEIGHT" per site.
int64_t CollapsedSum(const std::string& text, size_t* lines) {
  int64_t sum = 0;
  *lines = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    const size_t space = line.rfind(' ');
    EXPECT_NE(space, std::string::npos) << line;
    if (space != std::string::npos) {
      const std::string weight = line.substr(space + 1);
      EXPECT_EQ(weight.find_first_not_of("0123456789"), std::string::npos) << line;
      sum += std::stoll(weight);
      ++*lines;
    }
    start = end + 1;
  }
  return sum;
}

TEST_F(ProfileFormats, CollapsedWeightsSumToTheLiveBytes) {
  size_t lines = 0;
  const ProcessResult leaks = Cli({"report", report_path_, "--format", "collapsed"});
  ASSERT_EQ(leaks.exit_code, 0) << leaks.err;
  const json& device = report_["leaks"]["device"];
  ASSERT_GT(device["bytes"].get<int64_t>(), 0);
  EXPECT_EQ(CollapsedSum(leaks.out, &lines), device["bytes"].get<int64_t>());
  EXPECT_EQ(lines, device["sites"].size());

  const ProcessResult peak =
      Cli({"report", report_path_, "--format", "collapsed", "--what", "peak"});
  ASSERT_EQ(peak.exit_code, 0) << peak.err;
  const json& at_peak = report_["peak"];
  ASSERT_GT(at_peak["device_bytes"].get<int64_t>(), 0);
  // A program with few sites: the sites are captured at the peak itself.
  EXPECT_EQ(at_peak["sites_at_device_bytes"], at_peak["device_bytes"]);
  EXPECT_EQ(CollapsedSum(peak.out, &lines), at_peak["device_bytes"].get<int64_t>());
  EXPECT_EQ(lines, at_peak["sites"].size());

  const ProcessResult allocated =
      Cli({"report", report_path_, "--format", "collapsed", "--what", "allocated"});
  int64_t alloc_bytes = 0;
  for (const json& site : report_["sites"]) alloc_bytes += site["alloc_bytes"].get<int64_t>();
  EXPECT_EQ(CollapsedSum(allocated.out, &lines), alloc_bytes);
  EXPECT_EQ(lines, report_["sites"].size());
}

}  // namespace
}  // namespace gpuwatch::testing
