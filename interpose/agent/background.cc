#include "interpose/agent/background.h"

#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstring>
#include <exception>
#include <utility>

#include "interpose/agent/fatal_signals.h"
#include "interpose/agent/live.h"
#include "interpose/agent/reports.h"
#include "libgpuwatch/base/clock.h"
#include "libgpuwatch/base/fds.h"
#include "libgpuwatch/base/log.h"
#include "libgpuwatch/base/own_stack.h"
#include "libgpuwatch/stacks/stack_table.h"

namespace gpuwatch {
namespace {

// A report's snapshots and text are freed when it is written, but malloc
// keeps their pages for reuse: with a million allocations live, a checkpoint
// left about 80 MiB resident in a process that then idles. They go back to
// the system after each checkpoint (the next one faults in what it needs).
void ReleaseFreedMemory() {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

// One timeline sample of what each site holds now.
void SamplePeriodic(Agent& agent) { agent.events().Sampled(&agent.background.site_scan); }

// What the request pipe asked for since the last round.
struct Requests {
  bool snapshot = false;    // 's'
  bool reports = false;     // 'r'
  bool first_call = false;  // 'f'
};

// Drains the request pipe (non-blocking): notes snapshots and queued
// reports, and serves each fatal signal's request at once (its handler
// waits). False when the pipe is gone.
bool ReadRequests(int fd, Requests* out) {
  for (;;) {
    unsigned char bytes[256];
    const ssize_t r = read(fd, bytes, sizeof(bytes));
    if (r < 0) return errno == EINTR || errno == EAGAIN;
    if (r == 0) return false;
    for (ssize_t i = 0; i < r; ++i) {
      if (bytes[i] == 's') {
        out->snapshot = true;
      } else if (bytes[i] == 'r') {
        out->reports = true;
      } else if (bytes[i] == 'f') {
        out->first_call = true;
      } else {
        ServeFatalSignalRequest(bytes[i]);
      }
    }
  }
}

// gpuwatch's background thread: the reports callbacks captured, reports for
// the signals that end the process, snapshots on a signal (the handlers only write a byte to a
// pipe: no CUDA, lock or allocation in them), periodic timeline samples (GPUWATCH_SAMPLE_MS) and
// checkpoints. It waits for all of them in poll(), whose timeout is the next timer's due time.
void* BackgroundMain(void*) {
  // Named by itself: one prctl, where naming it from the starting thread
  // opens and writes /proc/self/task/TID/comm on the program's own path.
  pthread_setname_np(pthread_self(), "gpuwatch-bg");
  Agent& agent = GetAgent();
  // Held except in poll(): ForkPrepare waits for that.
  std::unique_lock<std::mutex> working(agent.background.mu);
  agent.background.starting = false;
  agent.background.started.notify_all();
  SetFatalSignalServerThread();
  FirstCallWork();  // a first call made before the thread started (injection)
  // An fd of -1 is ignored by poll.
  pollfd fds[2] = {{agent.background.request_pipe[0], POLLIN, 0}, {LiveSocketFd(), POLLIN, 0}};
  const bool live = fds[1].fd >= 0;
  const uint64_t interval_ns = static_cast<uint64_t>(agent.config().sample_ms) * 1000000ULL;
  constexpr uint64_t kCheckpointTickNs = 1000000000ULL;  // at most one checkpoint a second
  const bool checkpoints = agent.config().checkpoint_seconds != 0;
  Checkpoints checkpoint;
  uint64_t next = MonotonicNs() + interval_ns;
  uint64_t next_checkpoint = MonotonicNs() + kCheckpointTickNs;
  uint64_t next_live = MonotonicNs();  // the first sample at once
  bool warned = false;
  for (;;) {
    const uint64_t now = MonotonicNs();
    uint64_t due = UINT64_MAX;
    if (interval_ns != 0) due = next;
    if (checkpoints) due = std::min(due, next_checkpoint);
    if (live) due = std::min(due, next_live);
    int timeout_ms = -1;
    if (due != UINT64_MAX) {
      timeout_ms = now >= due ? 0 : static_cast<int>((due - now + 999999) / 1000000);
    } else if (fds[0].fd < 0 && fds[1].fd < 0) {
      return nullptr;
    }
    working.unlock();
    const int n = poll(fds, 2, timeout_ms);
    if (n < 0 && errno != EINTR) return nullptr;
    // Before background.mu: a fatal signal's handler waits for its report, and the
    // signal may have interrupted ForkPrepare, which holds background.mu.
    Requests requests;
    if (n > 0 && fds[0].revents != 0 && !ReadRequests(fds[0].fd, &requests)) {
      fds[0].fd = -1;  // the pipe is gone: keep the rest
    }
    working.lock();
    // Out of memory near the host's limit (samples, the live view): this
    // round's work is dropped, the thread goes on.
    try {
      // Signals that came while the last snapshot was written make one more
      // snapshot, not one each: a burst of signals cannot queue work.
      if (requests.first_call) FirstCallWork();
      if (requests.snapshot) WriteSnapshot("signal");
      // Every report queued so far is written: the bytes are only wake-ups.
      if (requests.reports) WritePendingReports();
      if (interval_ns != 0) {
        const uint64_t t = MonotonicNs();
        if (t >= next) {
          SamplePeriodic(agent);
          next = std::max(next + interval_ns, t);  // a late tick is not made up twice
        }
      }
      if (live) {
        const uint64_t t = MonotonicNs();
        if (t >= next_live) {
          LiveTick(agent, checkpoint.last.last_ns);
          next_live = std::max(next_live + kLiveTickNs, t);
        }
        if (n > 0 && fds[1].revents != 0) ServeLiveReaders(agent);
      }
      if (checkpoints) {
        const uint64_t t = MonotonicNs();
        if (t >= next_checkpoint) {
          const uint64_t last = checkpoint.last.last_ns;
          MaybeCheckpoint(agent, checkpoint, t);
          if (checkpoint.last.last_ns != last) ReleaseFreedMemory();
          next_checkpoint = t + kCheckpointTickNs;
        }
      }
      // The stack table's next chunk, mapped and faulted in here once its
      // last one is half used, not by the allocating thread that fills it.
      if (StackTable* stacks = CurrentSession()->stacks()) stacks->Prepare();
    } catch (const std::exception& e) {
      if (!std::exchange(warned, true)) Warn("gpuwatch's thread skipped work: %s", e.what());
    }
  }
}

void OnSnapshotSignal(int) {
  const int saved_errno = errno;
  const char byte = 's';
  (void)!write(GetAgent().background.request_pipe[1], &byte,
               1);  // non-blocking: a full pipe drops it
  errno = saved_errno;
}

}  // namespace

// Both ends non-blocking: a handler never waits on a full pipe, and the
// thread drains it without blocking.
bool MakeRequestPipe(Agent& agent) {
  return PipeAboveStdio(agent.background.request_pipe, O_CLOEXEC | O_NONBLOCK);
}

// The thread blocks every signal so that the host's signals go to its own
// threads, as they would without gpuwatch.
bool StartBackgroundThread(Agent& agent) {
  if (agent.background.request_pipe[0] < 0 && agent.config().sample_ms == 0 &&
      agent.config().checkpoint_seconds == 0 && LiveSocketFd() < 0) {
    return true;
  }
  sigset_t all;
  sigset_t old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_t thread;
  {
    std::lock_guard<std::mutex> lock(agent.background.mu);
    agent.background.starting = true;
  }
  // A stack of gpuwatch's size, not RLIMIT_STACK's: reports are written here.
  pthread_attr_t attr;
  int rc = pthread_attr_init(&attr);
  if (rc == 0) {
    rc = SetWorkStack(&attr) ? pthread_create(&thread, &attr, BackgroundMain, nullptr) : EINVAL;
    pthread_attr_destroy(&attr);
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (rc != 0) {
    {
      std::lock_guard<std::mutex> lock(agent.background.mu);
      agent.background.starting = false;
    }
    Warn(
        "cannot start gpuwatch's thread (%s); snapshots on a signal, periodic samples, "
        "checkpoints and reports on SIGTERM or a crash are off; out-of-memory and context "
        "reports are written at exit",
        std::strerror(rc));
    return false;
  }
  agent.background.running.store(true, std::memory_order_release);
  FatalSignalServerCreated();
  pthread_detach(thread);
  return true;
}

void InstallSnapshotSignal(Agent& agent) {
  const int sig = agent.config().snapshot_signal;
  if (sig == 0) return;
  struct sigaction current {};
  if (sigaction(sig, nullptr, &current) != 0) return;
  if ((current.sa_flags & SA_SIGINFO) != 0 || current.sa_handler != SIG_DFL) {
    Warn(
        "signal %d already has a handler in this program; snapshots on a signal are off (set "
        "GPUWATCH_SIGNAL to choose another)",
        sig);
    return;
  }
  if (agent.background.request_pipe[1] < 0) return;
  struct sigaction action {};
  action.sa_handler = OnSnapshotSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(sig, &action, nullptr);
}

}  // namespace gpuwatch
