// The report's `torch_blocks` section as types (docs/report-format.md,
// "PyTorch's blocks"): PyTorch's caching allocator's own view of its
// segments and the blocks in them, as torch.cuda.memory._snapshot() gave it
// to gpuwatch_torch_blocks() (`gpuwatch run --torch-blocks`), each segment
// matched by address to the gpuwatch site whose cudaMalloc made it. Its
// fields, the rules that merge its counts, and its one JSON writer and
// reader, which also reads what gpuwatch_torch_blocks() is handed. Part of
// the report model: report_model.h includes this file, so include
// report_model.h.
#ifndef GPUWATCH_LIBGPUWATCH_REPORT_MODEL_TORCH_H_
#define GPUWATCH_LIBGPUWATCH_REPORT_MODEL_TORCH_H_

#ifndef GPUWATCH_LIBGPUWATCH_REPORT_REPORT_MODEL_H_
#error "include libgpuwatch/report/report_model.h, which includes model_torch.h"
#endif

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace gpuwatch {

class ReportFieldReader;

// Blocks the section lists at most (all segments together); the rest are
// counted in omitted_blocks and omitted_bytes.
inline constexpr size_t kMaxTorchBlocks = 1000;
// Frames a block keeps at most, innermost first.
inline constexpr size_t kMaxTorchBlockFrames = 16;

// torch_blocks.segments[].blocks[]: one block of a segment, as PyTorch's
// snapshot has it. size: the block's bytes (PyTorch's rounding included);
// requested_size: what the tensor asked for (0 for a free block).
// clang-format off
#define GPUWATCH_TORCH_BLOCK_COUNTS(X) X(size, kSum) X(requested_size, kSum)
// clang-format on
struct TorchBlock {
  GPUWATCH_COUNTS(TorchBlock, GPUWATCH_TORCH_BLOCK_COUNTS)
  std::string address;  // hexadecimal text
  // PyTorch's: "active_allocated" (a live tensor's), "active_pending_free"
  // (freed, a stream still uses it), "inactive" (free, kept by the cache).
  std::string state;
  // The Python line that allocated it: the innermost frame's file's base
  // name and line ("train.py:12"); "": none (a free block).
  std::string location;
  std::vector<std::string> frames;  // "file:line:function", innermost first
};

// torch_blocks.segments[]: one segment PyTorch reserved (one cudaMalloc).
// reserved_bytes: its size; allocated_bytes: its blocks of live tensors;
// requested_bytes: what those tensors asked for; active_bytes: allocated
// plus freed blocks a stream still uses.
// clang-format off
#define GPUWATCH_TORCH_SEGMENT_COUNTS(X)                                    \
  X(reserved_bytes, kSum) X(allocated_bytes, kSum) X(requested_bytes, kSum) \
  X(active_bytes, kSum)
// clang-format on
struct TorchSegment {
  GPUWATCH_COUNTS(TorchSegment, GPUWATCH_TORCH_SEGMENT_COUNTS)
  std::string address;  // hexadecimal text
  int64_t device = 0;
  std::string pool;  // PyTorch's segment_type: "large" or "small"
  // The gpuwatch site that made it, matched by address to a live
  // allocation of the report (absent: gpuwatch has no live allocation
  // there, e.g. one made while recording was paused).
  std::optional<ReportSiteRef> site;
  std::vector<TorchBlock> blocks;  // by address
};

// torch_blocks: the sums over its segments, and the blocks not listed.
// clang-format off
#define GPUWATCH_TORCH_BLOCKS_COUNTS(X)                                                      \
  X(reserved_bytes, kSum) X(allocated_bytes, kSum) X(requested_bytes, kSum)                  \
  X(segment_count, kSum) X(block_count, kSum) X(omitted_blocks, kSum) X(omitted_bytes, kSum) \
  X(unmatched_segments, kSum)
// clang-format on
struct ReportTorchBlocks {
  GPUWATCH_COUNTS(ReportTorchBlocks, GPUWATCH_TORCH_BLOCKS_COUNTS)
  // When the Python side took PyTorch's snapshot: "exit" (atexit, just
  // before the exit report), "snapshot" (gpuwatch.snapshot()), "mark"
  // (gpuwatch.mark()) or what the caller of gpuwatch_torch_blocks() says.
  std::string moment;
  std::vector<TorchSegment> segments;  // by address; merged reports: none

  // Recomputes the section's sums from its segments and keeps at most
  // kMaxTorchBlocks blocks (the rest counted as omitted).
  void Summarize();
};

// The section as ReportModel::ToJson writes it.
nlohmann::json TorchBlocksJson(const ReportTorchBlocks& blocks);

// The section as ReadReportModel reads it (and gpuwatch_torch_blocks() its
// argument): every field's type checked, the first problem recorded in `r`
// with its path ("torch_blocks.segments[0].blocks[2].size").
ReportTorchBlocks ReadTorchBlocks(ReportFieldReader* r, const nlohmann::json& blocks);

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_REPORT_MODEL_TORCH_H_
