#include "interpose/agent/fatal_signals.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iterator>

#include "libgpuwatch/base/clock.h"
#include "libgpuwatch/base/fds.h"
#include "libgpuwatch/base/mutex.h"
#include "libgpuwatch/report/file.h"

namespace gpuwatch {
namespace {

// Hardware faults: when they come from the instruction itself, returning from
// the handler runs it again and the fault repeats with the default action.
bool IsFault(int sig) { return sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL; }

struct Slot {
  int sig;
  bool installed;
  struct sigaction previous;  // what the program had: SIG_DFL or its handler
};

// Written at install time, before any handler that reads them exists.
Slot g_slots[] = {{SIGTERM, false, {}}, {SIGINT, false, {}},  {SIGHUP, false, {}},
                  {SIGABRT, false, {}}, {SIGSEGV, false, {}}, {SIGBUS, false, {}},
                  {SIGFPE, false, {}},  {SIGILL, false, {}}};
SignalReportFn g_report = nullptr;
int g_request_fd = -1;  // handler -> background thread: one byte per request
// A request is queued or being served. Set by the handler that sends it,
// cleared by the background thread when the report is done.
std::atomic<bool> g_busy{false};
// A wait ran out: the background thread may be stuck (a lock held by the
// interrupted thread). Later signals then do not wait at all.
std::atomic<bool> g_stuck{false};
// The background thread was created (it may not run yet: a request then
// waits in the pipe), and its thread id once it runs.
std::atomic<bool> g_server_created{false};
std::atomic<pid_t> g_server_tid{0};
static_assert(std::atomic<bool>::is_always_lock_free && std::atomic<pid_t>::is_always_lock_free,
              "the signal handler needs lock-free atomics");

constexpr unsigned char kFinalBit = 0x80;

bool IsProgramHandler(const struct sigaction& a) {
  return a.sa_handler != SIG_DFL && a.sa_handler != SIG_IGN;
}

int64_t NowMs() { return static_cast<int64_t>(MonotonicNs() / 1000000); }  // signal-safe

// Asks the background thread for a report and waits for it, bounded. Only
// async-signal-safe calls: write, poll, clock_gettime, gettid.
void RequestReportAndWait(int sig, bool final) {
  if (!g_server_created.load() || g_server_tid.load() == gettid() || g_stuck.load()) return;
  if (HoldsGpuwatchLock()) {
    // The background thread would wait for a lock this thread holds while
    // this handler waits for the report (libgpuwatch/base/mutex.h): no report, no wait.
    static constexpr char kLine[] =
        "gpuwatch: no report for this signal: it interrupted gpuwatch while it held a lock the "
        "report needs\n";
    (void)!write(STDERR_FILENO, kLine, sizeof(kLine) - 1);
    return;
  }
  bool expected = false;
  if (g_busy.compare_exchange_strong(expected, true)) {
    const unsigned char byte = static_cast<unsigned char>(sig) | (final ? kFinalBit : 0);
    if (write(g_request_fd, &byte, 1) != 1) {
      g_busy.store(false);
      return;
    }
  }
  // Otherwise another thread's signal is being reported: that report is the
  // one this signal would have written; wait for it the same way.
  const int64_t deadline = NowMs() + kSignalReportWaitMs;
  while (g_busy.load()) {
    if (NowMs() >= deadline) {
      g_stuck.store(true);
      return;
    }
    poll(nullptr, 0, 2);
  }
}

void OnFatalSignal(int sig, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  const Slot* slot = nullptr;
  for (const Slot& s : g_slots) {
    if (s.sig == sig && s.installed) slot = &s;
  }
  if (slot == nullptr) return;  // cannot happen: installed only with a slot
  const bool chain = IsProgramHandler(slot->previous);
  RequestReportAndWait(sig, !chain);
  if (chain) {
    // The program's handler runs as it would have. SA_RESETHAND would have
    // reset it on delivery; the kernel reset nothing (ours lacks the flag).
    if ((slot->previous.sa_flags & SA_RESETHAND) != 0) {
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      sigemptyset(&dfl.sa_mask);
      sigaction(sig, &dfl, nullptr);
    }
    errno = saved_errno;
    if ((slot->previous.sa_flags & SA_SIGINFO) != 0) {
      slot->previous.sa_sigaction(sig, info, context);
    } else {
      slot->previous.sa_handler(sig);
    }
    return;
  }
  // The process ends here: a report this thread was writing when the signal
  // came is not finished; its temporary file goes.
  RemoveFileInFlight();
  // The default action: restore it and let the signal take effect. A fault
  // raised by the instruction repeats when the handler returns (its core dump
  // then shows the faulting instruction); anything sent is sent again.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
  if (!IsFault(sig) || info == nullptr || info->si_code <= 0) {
    raise(sig);  // pending: blocked while this handler runs
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    pthread_sigmask(SIG_UNBLOCK, &set, nullptr);  // delivered here, with the default action
  }
  errno = saved_errno;
}

}  // namespace

bool InstallFatalSignalHandlers(int skip, SignalReportFn report, int request_fd) {
  if (g_request_fd >= 0) return true;  // once
  if (request_fd < 0) return false;
  g_report = report;
  g_request_fd = request_fd;
  for (Slot& slot : g_slots) {
    if (slot.sig == skip) continue;
    struct sigaction previous {};
    if (sigaction(slot.sig, nullptr, &previous) != 0) continue;
    if (previous.sa_handler == SIG_IGN) continue;  // ignored stays ignored
    const bool chain = IsProgramHandler(previous);
    // Runtimes handle faults as part of their normal work (a JVM's implicit
    // null checks, garbage collectors' write barriers, WebAssembly bounds
    // checks): a report per fault would cost the host dearly. Theirs stay.
    if (chain && IsFault(slot.sig)) continue;
    slot.previous = previous;
    struct sigaction ours {};
    ours.sa_sigaction = OnFatalSignal;
    if (chain) {
      // The kernel applies our mask and flags when it delivers: make them the
      // program's, so that its handler runs as it did.
      ours.sa_mask = previous.sa_mask;
      ours.sa_flags = (previous.sa_flags | SA_SIGINFO) & ~SA_RESETHAND;
    } else {
      // One report at a time on this thread: the stop signals wait behind.
      sigemptyset(&ours.sa_mask);
      sigaddset(&ours.sa_mask, SIGTERM);
      sigaddset(&ours.sa_mask, SIGINT);
      sigaddset(&ours.sa_mask, SIGHUP);
      // SA_ONSTACK: a stack overflow reaches us where the program set up an
      // alternate stack; without one the kernel applies the default action.
      ours.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
    }
    slot.installed = true;
    if (sigaction(slot.sig, &ours, nullptr) != 0) slot.installed = false;
  }
  return true;
}

void FatalSignalServerCreated() { g_server_created.store(true); }

void SetFatalSignalServerThread() { g_server_tid.store(gettid()); }

void ServeFatalSignalRequest(unsigned char byte) {
  // Only what a handler sent: one of the signals it handles, with a request
  // pending.
  const int sig = byte & ~kFinalBit;
  const bool handled = std::any_of(std::begin(g_slots), std::end(g_slots),
                                   [sig](const Slot& s) { return s.sig == sig && s.installed; });
  if (!handled || !g_busy.load()) return;
  if (g_report != nullptr) g_report(sig, (byte & kFinalBit) != 0);
  g_busy.store(false);
}

bool FatalSignalWaiting() { return g_busy.load(); }

void FatalSignalsAfterFork(int request_fd) {
  g_server_created.store(false);
  g_server_tid.store(0);
  g_busy.store(false);
  g_stuck.store(false);
  // The parent's pipe is shared: a request written to it would reach the
  // parent's thread. -1 (no pipe of its own): handlers skip the report.
  if (g_request_fd >= 0) g_request_fd = request_fd;
}

const char* FatalSignalName(int sig, char* buf, int size) {
  const char* abbrev = sigabbrev_np(sig);
  if (abbrev != nullptr) {
    std::snprintf(buf, static_cast<size_t>(size), "SIG%s", abbrev);
  } else {
    std::snprintf(buf, static_cast<size_t>(size), "signal %d", sig);
  }
  return buf;
}

}  // namespace gpuwatch
