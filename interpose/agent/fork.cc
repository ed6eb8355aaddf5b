// fork() handlers (pthread_atfork): no lock of gpuwatch's is left held in
// the child, and the child of a fork reports what it does itself.
#include "interpose/agent/fork.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <utility>

#include "interpose/agent/agent.h"
#include "interpose/agent/background.h"
#include "interpose/agent/fatal_signals.h"
#include "interpose/agent/live.h"
#include "interpose/agent/reports.h"
#include "interpose/callbacks/callbacks.h"
#include "interpose/cupti/cupti_mux.h"
#include "libgpuwatch/base/fds.h"
#include "libgpuwatch/base/fork_locks.h"

namespace gpuwatch {
namespace {

// fork() while another thread is inside gpuwatch must not leave the child
// with a lock held forever: the one fork protocol (libgpuwatch/base/
// fork_locks.h) takes every lock around the fork, the agent's part here. That
// includes locks that are not ours: an allocator without fork handlers of its
// own (GCC 12's ASan allocator, for one) leaves the child a lock held forever
// if the background thread was allocating at the fork. So the thread is first
// brought to a point where it allocates nothing: started, and waiting in
// poll() (it holds background.mu otherwise). The host's own threads are the host's
// business.
bool LockAgent() {
  Agent& agent = GetAgent();
  if (!agent.active.load()) return false;
  std::unique_lock<std::mutex> background(agent.background.mu);
  agent.background.started.wait(background, [&agent] { return !agent.background.starting; });
  background.release();  // held until UnlockAgent
  mux::LockForFork();
  agent.reports.report_mu.lock();
  CurrentSession()->LockForFork();
  return true;
}

void UnlockAgent() {
  Agent& agent = GetAgent();
  CurrentSession()->UnlockAfterFork();
  agent.reports.report_mu.unlock();
  mux::UnlockAfterFork();
  agent.background.mu.unlock();
}

// The report path of process `pid`: GPUWATCH_OUTPUT expanded again, relative
// to the working directory at attach. When that is the parent's path (no %p
// in the pattern), the child's gets ".child-PID" appended.
std::string ForkOutputPath(const Agent& agent, long pid) {
  std::string path = ExpandOutputPattern(
      agent.config().output, pid, HostName(),
      RankFromEnvironment([](const char* n) { return std::getenv(n); }));  // NOLINT
  if (path.empty() || path[0] != '/') path = agent.attach.attach_dir + "/" + path;
  if (path == agent.attach.output_path) path += ".child-" + std::to_string(pid);
  return path;
}

// A pipe of the child's own in place of the parent's, when there was one.
void RenewPipe(int fds[2]) {
  if (fds[0] < 0) return;
  int fresh[2] = {-1, -1};
  if (PipeAboveStdio(fresh, O_CLOEXEC))
    fcntl(fresh[1], F_SETFL, fcntl(fresh[1], F_GETFL) | O_NONBLOCK);
  close(fds[0]);
  close(fds[1]);
  fds[0] = fresh[0];
  fds[1] = fresh[1];
}

}  // namespace

void Attachment::ResetInChild(std::string child_output_path) {
  output_path = std::move(child_output_path);
  fork_child = true;
}

void ReportScheduler::ResetInChild() {
  snapshots.store(0);
  ooms.store(0);
  context_reports.store(0);
  oom_reports.store(0);
  last_oom_report_ns.store(0);
  exit_report_written = false;
  exit_leak_known.store(false);
  final_report = false;
  exiting.store(false);
  const std::lock_guard<Mutex> lock(pending_mu);
  pending.clear();  // the parent's: it writes them
  last_oom = PendingReport{};
  last_oom_n = 0;
}

void BackgroundThread::ResetInChild() {
  RenewPipe(request_pipe);
  // The parent's first-call work is the parent's; the child's own first call
  // (its recording starts without one) asks its own thread.
  first_call_work.store(false);
  running.store(false);
}

namespace {

// The child of a fork() (a DataLoader worker, say) reports what it allocates
// itself, never a copy of the parent's tables: it starts a recording of its
// own (Session::StartChildRecording; the parent's copy is left untouched and
// unused) and a report path of its own. Threads do not survive fork(),
// so the background thread is started again, on a pipe of the child's own.
// Every lock is free again by now.
void RestartInChild() {
  Agent& agent = GetAgent();
  CurrentSession()->StartChildRecording();  // the callbacks and activity records see it at once
  agent.attach.ResetInChild(ForkOutputPath(agent, getpid()));
  agent.reports.ResetInChild();
  agent.background.ResetInChild();
  FatalSignalsAfterFork(agent.background.request_pipe[1]);  // before the background thread starts
  LiveAfterFork(agent);
  StartBackgroundThread(agent);
}

}  // namespace

void InstallForkHandlers() {
  fork_locks::AgentSteps steps;
  steps.lock = &LockAgent;
  steps.unlock = &UnlockAgent;
  steps.restart_in_child = &RestartInChild;
  fork_locks::SetAgentSteps(steps);
}

}  // namespace gpuwatch
