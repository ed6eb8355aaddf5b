// gpuwatch's own thread: it writes the reports callbacks captured, the
// reports of fatal signals, snapshots on the snapshot signal, and keeps the
// periodic timeline samples and checkpoints.
#ifndef GPUWATCH_INTERPOSE_BACKGROUND_H_
#define GPUWATCH_INTERPOSE_BACKGROUND_H_

#include "interpose/agent.h"

namespace gpuwatch {

// Starts the thread (after MakeWakePipe, InstallFatalSignalHandlers and the
// snapshot signal's pipe, whose ends it polls). Returns false when it could
// not start, with one line saying what is off.
bool StartBackgroundThread(Agent& s);

// The pipe callbacks wake the thread through (Agent::wake_pipe); false when
// none could be made.
bool MakeWakePipe(Agent& s);

// Installs the snapshot signal's handler (GPUWATCH_SIGNAL) and its pipe.
void InstallSnapshotSignal(Agent& s);

}  // namespace gpuwatch

#endif  // GPUWATCH_INTERPOSE_BACKGROUND_H_
