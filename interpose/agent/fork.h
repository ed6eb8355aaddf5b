// fork() under gpuwatch: every lock of gpuwatch's is taken around the fork,
// and the child starts tables, a report path and a background thread of its
// own (fork.cc).
#ifndef GPUWATCH_INTERPOSE_AGENT_FORK_H_
#define GPUWATCH_INTERPOSE_AGENT_FORK_H_

namespace gpuwatch {

void InstallForkHandlers();

}  // namespace gpuwatch

#endif  // GPUWATCH_INTERPOSE_AGENT_FORK_H_
