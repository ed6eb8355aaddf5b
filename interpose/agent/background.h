// gpuwatch's own thread: it writes the reports callbacks captured, the
// reports of fatal signals, snapshots on the snapshot signal, and keeps the
// periodic timeline samples and checkpoints.
#ifndef GPUWATCH_INTERPOSE_AGENT_BACKGROUND_H_
#define GPUWATCH_INTERPOSE_AGENT_BACKGROUND_H_

#include "interpose/agent/agent.h"

namespace gpuwatch {

// Starts the thread (after MakeRequestPipe and the live socket, which it
// polls). Returns false when it could not start, with one line saying what
// is off.
bool StartBackgroundThread(Agent& agent);

// Agent::request_pipe, through which signal handlers and callbacks ask the
// thread for work; false when none could be made.
bool MakeRequestPipe(Agent& agent);

// Installs the snapshot signal's handler (GPUWATCH_SIGNAL), once the thread
// runs: it writes 's' to the request pipe.
void InstallSnapshotSignal(Agent& agent);

}  // namespace gpuwatch

#endif  // GPUWATCH_INTERPOSE_AGENT_BACKGROUND_H_
