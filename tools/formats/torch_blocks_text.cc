// `gpuwatch report`'s text of the torch_blocks section (report_text.h):
// PyTorch's segments under the gpuwatch site that made each, reserved
// against allocated, and each block with its Python line.
#include <algorithm>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "libgpuwatch/symbolize/symbolizer.h"
#include "tools/formats/report_text.h"

namespace gpuwatch::tools {

namespace {

// A block frame "/path/file.py:12:function" as its function and
// "file.py:12".
struct BlockFrame {
  std::string function;
  std::string where;
};
BlockFrame SplitFrame(const std::string& frame) {
  const size_t function_at = frame.rfind(':');
  if (function_at == std::string::npos || function_at == 0) return {"", frame};
  return {frame.substr(function_at + 1),
          std::string(Basename(std::string_view(frame).substr(0, function_at)))};
}

std::string StateText(const TorchBlock& b) {
  if (b.state == "active_allocated") return "allocated";
  if (b.state == "inactive") return "free";
  if (b.state == "active_pending_free") return "pending free";
  return b.state;
}

void PrintSegment(const TorchSegment& s, Printer* p) {
  p->Line("    segment " + s.address + "  " + FormatBytes(s.reserved_bytes) + " reserved, " +
          FormatBytes(s.allocated_bytes) + " allocated" +
          (s.pool.empty() ? "" : " (" + s.pool + " pool)"));
  const size_t shown = std::min(s.blocks.size(), p->top());
  for (size_t i = 0; i < shown; ++i) {
    const TorchBlock& b = s.blocks[i];
    std::string line = "    " + Printer::Pad(FormatBytes(b.size), 10) + "  " +
                       Printer::Pad(StateText(b), 9) + "  " + b.address;
    // The block's line and its function, as a site is shown, then two callers.
    size_t at = 0;
    while (at < b.frames.size() && SplitFrame(b.frames[at]).where != b.location) ++at;
    const size_t column = line.size() + 2;  // where the location starts
    if (!b.location.empty()) line += "  " + b.location;
    if (at < b.frames.size()) line += " (" + SplitFrame(b.frames[at]).function + ")";
    p->Line(line);
    for (size_t f = at + 1; f < b.frames.size() && f < at + 3; ++f) {
      const BlockFrame caller = SplitFrame(b.frames[f]);
      p->Line(std::string(column, ' ') + "<- " + caller.function + " (" + caller.where + ")");
    }
  }
  p->More(shown, s.blocks.size(), "blocks");
}

}  // namespace

void PrintTorchBlocks(const ReportModel& m, Printer* p) {
  if (!m.torch_blocks.has_value()) return;
  const ReportTorchBlocks& t = *m.torch_blocks;
  p->Blank();
  p->Line("PyTorch's blocks (torch.cuda.memory._snapshot() at " +
          (t.moment.empty() ? std::string("?") : t.moment) + "): " + FormatBytes(t.reserved_bytes) +
          " reserved, " + FormatBytes(t.allocated_bytes) + " allocated, in " +
          CountOf(t.segment_count, "segment", "segments"));
  // The segments by the gpuwatch site that made them, in the order they come.
  std::vector<std::string> order;
  std::map<std::string, std::vector<const TorchSegment*>> by_site;
  for (const TorchSegment& s : t.segments) {
    const std::string where = s.site.has_value() ? s.site->location : "";
    auto [it, added] = by_site.try_emplace(where);
    if (added) order.push_back(where);
    it->second.push_back(&s);
  }
  for (const std::string& where : order) {
    const std::vector<const TorchSegment*>& segments = by_site[where];
    uint64_t reserved = 0;
    uint64_t allocated = 0;
    for (const TorchSegment* s : segments) {
      reserved += s->reserved_bytes;
      allocated += s->allocated_bytes;
    }
    p->Line("  " +
            (where.empty() ? std::string("(no live gpuwatch allocation at the address)")
                           : "made at " + where) +
            ": " + FormatBytes(reserved) + " reserved, " + FormatBytes(allocated) +
            " allocated in " + CountOf(segments.size(), "segment", "segments"));
    const size_t shown = std::min(segments.size(), p->top());
    for (size_t i = 0; i < shown; ++i) PrintSegment(*segments[i], p);
    p->More(shown, segments.size(), "segments");
  }
  if (t.omitted_blocks != 0) {
    p->Line("  " + CountOf(t.omitted_blocks, "block", "blocks") + " (" +
            FormatBytes(t.omitted_bytes) + ") past the report's limit, not listed");
  }
}

}  // namespace gpuwatch::tools
