// The `torch_blocks` section of the report model: what ToJson writes,
// ReadReportModel reads back to the same values and writes again to the
// same document; a mistyped field is named by its path; Summarize recomputes
// the sums and keeps at most kMaxTorchBlocks blocks.
#include <gtest/gtest.h>

#include <string>

#include "libgpuwatch/report/report_model.h"
#include "tests/unit/report_model_checks.h"

namespace gpuwatch {
namespace {

using nlohmann::json;

ReportTorchBlocks Blocks() {
  ReportTorchBlocks t;
  t.moment = "exit";
  Number(&t, 10);
  TorchSegment s;
  s.address = "0x7f0000000000";
  s.device = 1;
  s.pool = "large";
  s.site = ReportSiteRef{3, "train.py:12"};
  Number(&s, 100);
  TorchBlock live;
  live.address = "0x7f0000000000";
  live.state = "active_allocated";
  live.location = "train.py:12";
  live.frames = {"/src/train.py:12:make", "/src/train.py:40:<module>"};
  Number(&live, 200);
  TorchBlock free;  // no frames, no location: neither written
  free.address = "0x7f0000400000";
  free.state = "inactive";
  Number(&free, 300);
  s.blocks = {live, free};
  t.segments.push_back(s);
  TorchSegment unmatched;  // no gpuwatch site
  unmatched.address = "0x7f0001000000";
  unmatched.pool = "small";
  Number(&unmatched, 400);
  t.segments.push_back(unmatched);
  return t;
}

TEST(ModelTorchTest, WrittenAndReadBackToTheSameValues) {
  ReportModel m;
  m.trigger = "exit";
  m.torch_blocks = Blocks();
  json doc = json::object();
  m.ToJson(&doc);
  const json& section = doc["torch_blocks"];
  EXPECT_FALSE(section["segments"][0]["blocks"][1].contains("location"));
  EXPECT_FALSE(section["segments"][0]["blocks"][1].contains("frames"));
  EXPECT_FALSE(section["segments"][1].contains("site"));

  ReportModel read;
  std::string error;
  ASSERT_TRUE(ReadReportModel(doc, &read, &error)) << error;
  ASSERT_TRUE(read.torch_blocks.has_value());
  const ReportTorchBlocks& a = *m.torch_blocks;
  const ReportTorchBlocks& b = *read.torch_blocks;
  EXPECT_EQ(b.moment, "exit");
  ExpectSameCounts(a, b, "torch_blocks");
  ASSERT_EQ(b.segments.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const TorchSegment& sa = a.segments[i];
    const TorchSegment& sb = b.segments[i];
    ExpectSameCounts(sa, sb, "segment");
    EXPECT_EQ(sa.address, sb.address);
    EXPECT_EQ(sa.device, sb.device);
    EXPECT_EQ(sa.pool, sb.pool);
    EXPECT_EQ(sa.site.has_value(), sb.site.has_value());
    ASSERT_EQ(sa.blocks.size(), sb.blocks.size());
    for (size_t j = 0; j < sa.blocks.size(); ++j) {
      ExpectSameCounts(sa.blocks[j], sb.blocks[j], "block");
      EXPECT_EQ(sa.blocks[j].address, sb.blocks[j].address);
      EXPECT_EQ(sa.blocks[j].state, sb.blocks[j].state);
      EXPECT_EQ(sa.blocks[j].location, sb.blocks[j].location);
      EXPECT_EQ(sa.blocks[j].frames, sb.blocks[j].frames);
    }
  }
  ASSERT_TRUE(b.segments[0].site.has_value());
  EXPECT_EQ(b.segments[0].site->site, 3u);
  EXPECT_EQ(b.segments[0].site->location, "train.py:12");
  json again = json::object();
  read.ToJson(&again);
  EXPECT_EQ(again["torch_blocks"], section);
}

TEST(ModelTorchTest, AMistypedFieldIsNamedByItsPath) {
  ReportModel m;
  m.torch_blocks = Blocks();
  json doc = json::object();
  m.ToJson(&doc);
  doc["torch_blocks"]["segments"][0]["blocks"][1]["size"] = -5;
  ReportModel read;
  std::string error;
  EXPECT_FALSE(ReadReportModel(doc, &read, &error));
  EXPECT_EQ(error.rfind("torch_blocks.segments[0].blocks[1].size is -5", 0), 0u) << error;
  doc["torch_blocks"]["segments"][0]["blocks"][1]["size"] = 5;
  doc["torch_blocks"]["segments"][1]["blocks"] = "none";
  EXPECT_FALSE(ReadReportModel(doc, &read, &error));
  EXPECT_EQ(error.rfind("torch_blocks.segments[1].blocks is", 0), 0u) << error;
}

TEST(ModelTorchTest, SummarizeSumsTheSegmentsAndKeepsAtMostTheLimitOfBlocks) {
  ReportTorchBlocks t;
  t.omitted_blocks = 99;  // the caller's sums are never kept
  for (int i = 0; i < 3; ++i) {
    TorchSegment& s = t.segments.emplace_back();
    s.reserved_bytes = 20 << 20;
    s.allocated_bytes = 4 << 20;
    s.requested_bytes = 3 << 20;
    s.site = ReportSiteRef{1, "caller.py:1"};  // the library's to fill
    s.blocks.resize(kMaxTorchBlocks / 2 + 1);
    for (TorchBlock& b : s.blocks) {
      b.size = 512;
      b.frames.resize(kMaxTorchBlockFrames + 3, "f.py:1:f");
    }
  }
  t.Summarize();
  EXPECT_EQ(t.reserved_bytes, uint64_t{60} << 20);
  EXPECT_EQ(t.allocated_bytes, uint64_t{12} << 20);
  EXPECT_EQ(t.requested_bytes, uint64_t{9} << 20);
  EXPECT_EQ(t.segment_count, 3u);
  EXPECT_EQ(t.block_count, 3 * (kMaxTorchBlocks / 2 + 1));
  EXPECT_EQ(t.segments[0].blocks.size(), kMaxTorchBlocks / 2 + 1);
  EXPECT_EQ(t.segments[1].blocks.size(), kMaxTorchBlocks / 2 - 1);
  EXPECT_EQ(t.segments[2].blocks.size(), 0u);
  EXPECT_EQ(t.omitted_blocks, kMaxTorchBlocks / 2 + 3);
  EXPECT_EQ(t.omitted_bytes, 512 * (kMaxTorchBlocks / 2 + 3));
  EXPECT_EQ(t.segments[0].blocks[0].frames.size(), kMaxTorchBlockFrames);
  EXPECT_FALSE(t.segments[0].site.has_value());
}

}  // namespace
}  // namespace gpuwatch
