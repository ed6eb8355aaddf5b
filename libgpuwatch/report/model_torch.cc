// The `torch_blocks` section: its field tables, writer and reader
// (model_torch.h).
#include <algorithm>
#include <string>
#include <utility>

#include "libgpuwatch/report/report_model.h"

namespace gpuwatch {

using nlohmann::json;
namespace key = report_key;

GPUWATCH_COUNTS_OF(TorchBlock, GPUWATCH_TORCH_BLOCK_COUNTS)
GPUWATCH_COUNTS_OF(TorchSegment, GPUWATCH_TORCH_SEGMENT_COUNTS)
GPUWATCH_COUNTS_OF(ReportTorchBlocks, GPUWATCH_TORCH_BLOCKS_COUNTS)

void ReportTorchBlocks::Summarize() {
  const ReportTorchBlocks zero;
  for (const CountField<ReportTorchBlocks>& f : Counts()) this->*f.member = zero.*f.member;
  size_t listed = 0;
  for (TorchSegment& s : segments) {
    reserved_bytes += s.reserved_bytes;
    allocated_bytes += s.allocated_bytes;
    requested_bytes += s.requested_bytes;
    ++segment_count;
    block_count += s.blocks.size();
    s.site.reset();  // the library's to fill (by address), never the caller's
    const size_t keep = kMaxTorchBlocks - std::min(listed, kMaxTorchBlocks);
    for (size_t i = keep; i < s.blocks.size(); ++i) {
      ++omitted_blocks;
      omitted_bytes += s.blocks[i].size;
    }
    if (s.blocks.size() > keep) s.blocks.resize(keep);
    listed += s.blocks.size();
    for (TorchBlock& b : s.blocks) {
      if (b.frames.size() > kMaxTorchBlockFrames) b.frames.resize(kMaxTorchBlockFrames);
    }
  }
}

json TorchBlocksJson(const ReportTorchBlocks& blocks) {
  json out = {{"moment", blocks.moment}};
  PutCounts(blocks, ReportTorchBlocks::Counts(), &out);
  json segments = json::array();
  for (const TorchSegment& s : blocks.segments) {
    json e = {{"address", s.address}, {key::kDevice, s.device}, {"pool", s.pool}};
    PutCounts(s, TorchSegment::Counts(), &e);
    if (s.site.has_value()) {
      e[key::kSite] = s.site->site;
      e[key::kLocation] = s.site->location;
    }
    json list = json::array();
    for (const TorchBlock& b : s.blocks) {
      json block = {{"address", b.address}, {"state", b.state}};
      PutCounts(b, TorchBlock::Counts(), &block);
      if (!b.location.empty()) block[key::kLocation] = b.location;
      if (!b.frames.empty()) block[key::kFrames] = b.frames;
      list.push_back(std::move(block));
    }
    e["blocks"] = std::move(list);
    segments.push_back(std::move(e));
  }
  out[key::kSegments] = std::move(segments);
  return out;
}

namespace {

TorchBlock ReadBlock(ReportFieldReader* r, const json& e, const std::string& at) {
  TorchBlock b;
  b.address = r->TextAt(e, at, "address");
  b.state = r->TextAt(e, at, "state");
  r->CountsAt(e, at, TorchBlock::Counts(), &b);
  b.location = r->TextAt(e, at, key::kLocation);
  b.frames = r->TextsAt(e, at, key::kFrames);
  return b;
}

TorchSegment ReadSegment(ReportFieldReader* r, const json& e, const std::string& at) {
  TorchSegment s;
  s.address = r->TextAt(e, at, "address");
  s.device = r->IntegerAt(e, at, key::kDevice);
  s.pool = r->TextAt(e, at, "pool");
  r->CountsAt(e, at, TorchSegment::Counts(), &s);
  if (ReportFieldReader::Member(e, key::kSite) != nullptr) {
    s.site = ReportSiteRef{r->CountAt(e, at, key::kSite), r->TextAt(e, at, key::kLocation)};
  }
  r->Objects(e, at, "blocks", [&](const json& b, const std::string& block_at) {
    s.blocks.push_back(ReadBlock(r, b, block_at));
  });
  return s;
}

}  // namespace

ReportTorchBlocks ReadTorchBlocks(ReportFieldReader* r, const json& blocks) {
  ReportTorchBlocks out;
  const std::string path = key::kTorchBlocks;
  out.moment = r->TextAt(blocks, path, "moment");
  r->CountsAt(blocks, path, ReportTorchBlocks::Counts(), &out);
  r->Objects(blocks, path, key::kSegments, [&](const json& e, const std::string& at) {
    out.segments.push_back(ReadSegment(r, e, at));
  });
  return out;
}

}  // namespace gpuwatch
