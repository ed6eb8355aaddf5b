// gpuwatch_torch_blocks(): PyTorch's allocator view, handed over as JSON by
// the Python side (python/gpuwatch/torch_blocks.py), read with the report
// model's own reader (model_torch.h) and kept for the next report. Never
// called inside a CUDA callback.
#include "interpose/agent/torch_blocks.h"

#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "gpuwatch/gpuwatch.h"
#include "libgpuwatch/base/fork_locks.h"
#include "libgpuwatch/base/log.h"
#include "libgpuwatch/report/report_model.h"

namespace gpuwatch {

namespace {

// Larger hand-overs are refused: a snapshot reduced by the Python side is
// far smaller (each block ~200 bytes, at most kMaxTorchBlocks kept).
constexpr size_t kMaxTorchBlocksJson = size_t{64} << 20;

struct Latest {
  std::mutex mu;
  std::shared_ptr<const ReportTorchBlocks> blocks;
};

// Never destroyed: the exit report may be written after static destructors.
// Its lock is a leaf of the fork protocol: a fork while another thread swaps
// the pointer must not leave the child's next hand-over waiting for ever.
Latest& TheLatest() {
  static Latest* latest = [] {
    auto* made = new Latest;
    fork_locks::AddLeaf(&made->mu, "PyTorch's blocks");
    return made;
  }();
  return *latest;
}

// The hand-over read into `out`; false (and `why`) when it is not one.
bool ReadHandOver(const char* text, size_t len, ReportTorchBlocks* out, std::string* why) {
  if (text == nullptr) {
    *why = "no text";
    return false;
  }
  if (len > kMaxTorchBlocksJson) {
    *why = "over 64 MiB";
    return false;
  }
  const nlohmann::json doc = nlohmann::json::parse(text, text + len, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    *why = "not a JSON object";
    return false;
  }
  if (ReportFieldReader::Member(doc, report_key::kSegments) == nullptr) {
    *why = "no \"segments\"";
    return false;
  }
  ReportFieldReader r;
  *out = ReadTorchBlocks(&r, doc);
  if (r.failed()) {
    *why = r.problem();
    return false;
  }
  out->Summarize();
  return true;
}

}  // namespace

std::shared_ptr<const ReportTorchBlocks> LatestTorchBlocks() {
  Latest& latest = TheLatest();
  // Tried, never waited for: a signal's report may be written on the thread
  // that holds the lock (for a pointer's swap, in gpuwatch_torch_blocks);
  // that report goes without the section.
  std::unique_lock<std::mutex> lock(latest.mu, std::defer_lock);
  for (int i = 0; i < 1000 && !lock.try_lock(); ++i) std::this_thread::yield();
  if (!lock.owns_lock()) return nullptr;
  return latest.blocks;
}

}  // namespace gpuwatch

int gpuwatch_torch_blocks(const char* json, size_t len) {
  std::string why;
  try {
    auto blocks = std::make_shared<gpuwatch::ReportTorchBlocks>();
    if (gpuwatch::ReadHandOver(json, len, blocks.get(), &why)) {
      gpuwatch::Latest& latest = gpuwatch::TheLatest();
      const std::lock_guard<std::mutex> lock(latest.mu);
      latest.blocks = std::move(blocks);
      return 0;
    }
  } catch (const std::exception& e) {  // out of memory: the caller gets -1, not an exception
    why = e.what();
  }
  gpuwatch::Warn("gpuwatch_torch_blocks: refused: %s", why.c_str());
  return -1;
}
