// This process's status page (libgpuwatch/base/status_page.h), next to its
// live socket: opened with it, its process part and the sites of calls in
// progress written by the background thread at each live tick, removed at
// exit, made again in a fork child.
#ifndef GPUWATCH_INTERPOSE_AGENT_STATUS_H_
#define GPUWATCH_INTERPOSE_AGENT_STATUS_H_

#include <cstdint>
#include <string>

#include "interpose/agent/agent.h"

namespace gpuwatch {

// After the live socket is bound in `dir` (at attach, and in a fork child):
// one line on failure, and the process runs without a page.
void OpenStatus(const std::string& dir);

// Once a second: what the process holds per device, its last checkpoint
// (`checkpoint_ns` CLOCK_MONOTONIC, 0 when none), and the sites of calls in
// progress not resolved yet.
void StatusTick(Agent& agent, uint64_t checkpoint_ns);

}  // namespace gpuwatch

#endif  // GPUWATCH_INTERPOSE_AGENT_STATUS_H_
