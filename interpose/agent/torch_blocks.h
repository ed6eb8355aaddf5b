// PyTorch's blocks handed over by the Python side (gpuwatch_torch_blocks(),
// docs/pytorch.md "PyTorch's blocks in the report"): the latest copy, kept
// for the next report.
#ifndef GPUWATCH_INTERPOSE_AGENT_TORCH_BLOCKS_H_
#define GPUWATCH_INTERPOSE_AGENT_TORCH_BLOCKS_H_

#include <memory>

namespace gpuwatch {

struct ReportTorchBlocks;

// The copy gpuwatch_torch_blocks() last accepted; null when none was (or,
// rarely, when a hand-over held the lock throughout: never blocks).
std::shared_ptr<const ReportTorchBlocks> LatestTorchBlocks();

}  // namespace gpuwatch

#endif  // GPUWATCH_INTERPOSE_AGENT_TORCH_BLOCKS_H_
