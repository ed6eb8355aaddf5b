// The pprof converter on a hand-written report with known numbers: one sample
// per site with its live and allocated figures joined by site id, 0 where a
// site is in only one list, inlined frames folded into one location, a site
// without a stack, and the omitted sites' bytes in a sample of their own.
#include "tools/formats/pprof_format.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <map>
#include <string>

#include "tools/pprof/profile.pb.h"

namespace gpuwatch::tools {
namespace {

namespace pb = perftools::profiles;

const char* const kReport = R"json({
  "schema": "gpuwatch-report", "version": 1, "trigger": "exit",
  "process": {"pid": 7, "command": ["./train", "--steps", "3"], "elapsed_ns": 5000},
  "totals": {},
  "leaks": {
    "device": {"bytes": 7340032, "count": 5, "omitted_sites": 2, "omitted_bytes": 1048576,
      "sites": [
        {"site": 3, "location": "a.cu:10", "bytes": 4194304, "count": 2, "frames": [
          {"function": "Helper()", "file": "/src/a.cu", "line": 10, "module": "/bin/train",
           "inlined": true},
          {"function": "Step(int)", "file": "/src/a.cu", "line": 20, "module": "/bin/train"},
          {"function": "main", "file": "/src/main.cc", "line": 5, "module": "/bin/train"}]},
        {"site": 0, "location": "<no stack>", "bytes": 2097152, "count": 1, "frames": []}]},
    "host": {"bytes": 65536, "count": 1, "omitted_sites": 0, "omitted_bytes": 0,
      "sites": [
        {"site": 3, "location": "a.cu:10", "bytes": 65536, "count": 1, "frames": []}]}
  },
  "sites": [
    {"site": 3, "location": "a.cu:10", "allocs": 9, "alloc_bytes": 9437184, "frames": []},
    {"site": 8, "location": "b.cu:4", "allocs": 4, "alloc_bytes": 1024, "frames": [
      {"function": "", "file": "", "line": 0, "module": "/usr/lib/libfoo.so"},
      {"function": "main", "file": "/src/main.cc", "line": 6, "module": "/bin/train"}]}
  ]
})json";

pb::Profile Decode(const std::string& gz) {
  std::string raw(1 << 20, '\0');
  uLongf size = raw.size();
  z_stream z{};
  EXPECT_EQ(inflateInit2(&z, 15 + 16), Z_OK);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data()));
  z.avail_in = static_cast<uInt>(gz.size());
  z.next_out = reinterpret_cast<Bytef*>(raw.data());
  z.avail_out = static_cast<uInt>(size);
  EXPECT_EQ(inflate(&z, Z_FINISH), Z_STREAM_END);
  raw.resize(z.total_out);
  inflateEnd(&z);
  pb::Profile p;
  EXPECT_TRUE(p.ParseFromString(raw));
  return p;
}

class PprofFormat : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string gz;
    ReportModel m;
    std::string error;
    ASSERT_TRUE(ReadReportModel(json::parse(kReport), &m, &error)) << error;
    ASSERT_TRUE(Gzip(PprofProfile(m), &gz));
    ASSERT_GE(gz.size(), 2u);
    EXPECT_EQ(static_cast<unsigned char>(gz[0]), 0x1f);  // gzip magic
    EXPECT_EQ(static_cast<unsigned char>(gz[1]), 0x8b);
    p_ = Decode(gz);
  }
  const std::string& S(int64_t i) const { return p_.string_table(static_cast<int>(i)); }
  const pb::Location& Loc(uint64_t id) const {
    for (const pb::Location& l : p_.location()) {
      if (l.id() == id) return l;
    }
    ADD_FAILURE() << "no location " << id;
    return p_.location(0);
  }
  const pb::Function& Fn(uint64_t id) const {
    for (const pb::Function& f : p_.function()) {
      if (f.id() == id) return f;
    }
    ADD_FAILURE() << "no function " << id;
    return p_.function(0);
  }
  // The sample labelled site=N, or null.
  const pb::Sample* SampleOfSite(int64_t site) const {
    for (const pb::Sample& s : p_.sample()) {
      for (const pb::Label& l : s.label()) {
        if (S(l.key()) == "site" && l.num() == site) return &s;
      }
    }
    return nullptr;
  }
  pb::Profile p_;
};

TEST_F(PprofFormat, OneSamplePerSiteWithLiveAndAllocatedFigures) {
  EXPECT_EQ(S(0), "");
  // Sites 3, 0 and 8, and the omitted sites.
  ASSERT_EQ(p_.sample_size(), 4);
  const pb::Sample* s3 = SampleOfSite(3);
  ASSERT_NE(s3, nullptr);
  // Device and pinned host memory of the same site together.
  EXPECT_EQ(s3->value(0), 4194304 + 65536);
  EXPECT_EQ(s3->value(1), 3);
  EXPECT_EQ(s3->value(2), 9437184);
  EXPECT_EQ(s3->value(3), 9);
  const pb::Sample* s0 = SampleOfSite(0);
  ASSERT_NE(s0, nullptr);
  EXPECT_EQ(s0->value(0), 2097152);
  EXPECT_EQ(s0->value(1), 1);
  EXPECT_EQ(s0->value(2), 0);  // not in `sites`
  EXPECT_EQ(s0->value(3), 0);
  const pb::Sample* s8 = SampleOfSite(8);
  ASSERT_NE(s8, nullptr);
  EXPECT_EQ(s8->value(0), 0);  // not live
  EXPECT_EQ(s8->value(1), 0);
  EXPECT_EQ(s8->value(2), 1024);
  EXPECT_EQ(s8->value(3), 4);

  // The live sums are the report's: 1 MiB and 1 allocation in omitted sites.
  int64_t live = 0;
  int64_t count = 0;
  for (const pb::Sample& s : p_.sample()) {
    live += s.value(0);
    count += s.value(1);
  }
  EXPECT_EQ(live, 7340032 + 65536);
  EXPECT_EQ(count, 5 + 1);
  EXPECT_EQ(p_.duration_nanos(), 5000);
  ASSERT_EQ(p_.comment_size(), 2);
  EXPECT_EQ(S(p_.comment(0)), "command: ./train --steps 3");
}

TEST_F(PprofFormat, InlinedFramesShareALocationAndModulesAreMappings) {
  const pb::Sample* s3 = SampleOfSite(3);
  ASSERT_NE(s3, nullptr);
  // Helper() inlined into Step(int): one location with two lines, then main.
  ASSERT_EQ(s3->location_id_size(), 2);
  const pb::Location& leaf = Loc(s3->location_id(0));
  ASSERT_EQ(leaf.line_size(), 2);
  EXPECT_EQ(S(Fn(leaf.line(0).function_id()).name()), "Helper()");
  EXPECT_EQ(S(Fn(leaf.line(0).function_id()).filename()), "/src/a.cu");
  EXPECT_EQ(leaf.line(0).line(), 10);
  EXPECT_EQ(S(Fn(leaf.line(1).function_id()).name()), "Step(int)");
  EXPECT_EQ(leaf.line(1).line(), 20);
  const pb::Location& caller = Loc(s3->location_id(1));
  ASSERT_EQ(caller.line_size(), 1);
  EXPECT_EQ(S(Fn(caller.line(0).function_id()).name()), "main");
  EXPECT_EQ(caller.line(0).line(), 5);

  // Two modules, two mappings; the one with inlined frames says so.
  ASSERT_EQ(p_.mapping_size(), 2);
  std::map<std::string, const pb::Mapping*> by_file;
  for (const pb::Mapping& m : p_.mapping()) by_file[S(m.filename())] = &m;
  ASSERT_EQ(by_file.count("/bin/train"), 1u);
  ASSERT_EQ(by_file.count("/usr/lib/libfoo.so"), 1u);
  EXPECT_TRUE(by_file["/bin/train"]->has_inline_frames());
  EXPECT_TRUE(by_file["/bin/train"]->has_line_numbers());
  EXPECT_FALSE(by_file["/usr/lib/libfoo.so"]->has_line_numbers());
  EXPECT_EQ(leaf.mapping_id(), by_file["/bin/train"]->id());

  // A frame without a symbol is named by its module; site 8's main at line 6
  // is a location apart from site 3's main at line 5, the function shared.
  const pb::Sample* s8 = SampleOfSite(8);
  ASSERT_NE(s8, nullptr);
  ASSERT_EQ(s8->location_id_size(), 2);
  const pb::Location& foo = Loc(s8->location_id(0));
  EXPECT_EQ(S(Fn(foo.line(0).function_id()).name()), "libfoo.so");
  EXPECT_EQ(foo.mapping_id(), by_file["/usr/lib/libfoo.so"]->id());
  const pb::Location& main6 = Loc(s8->location_id(1));
  EXPECT_NE(main6.id(), caller.id());
  EXPECT_EQ(main6.line(0).function_id(), caller.line(0).function_id());

  // No stack: the location text is the only frame.
  const pb::Sample* s0 = SampleOfSite(0);
  ASSERT_NE(s0, nullptr);
  ASSERT_EQ(s0->location_id_size(), 1);
  EXPECT_EQ(S(Fn(Loc(s0->location_id(0)).line(0).function_id()).name()), "<no stack>");
  EXPECT_EQ(Loc(s0->location_id(0)).mapping_id(), 0u);
}

}  // namespace
}  // namespace gpuwatch::tools
