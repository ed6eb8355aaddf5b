// A report before the process dies of a signal: SIGTERM, SIGINT and SIGHUP
// (a scheduler's or a user's stop) and SIGABRT, SIGSEGV, SIGBUS, SIGFPE and
// SIGILL (a crash). After the report the process ends exactly as it would
// have without gpuwatch: the same signal, or the program's own handler.
//
// Writing a report is not async-signal-safe, so the handler does not write
// it: it hands the signal to gpuwatch's background thread through a pipe,
// waits for it at most kSignalReportWaitMs, and then lets the signal take its
// course. See docs/reliability.md for the rules of each disposition.
#ifndef GPUWATCH_INTERPOSE_AGENT_FATAL_SIGNALS_H_
#define GPUWATCH_INTERPOSE_AGENT_FATAL_SIGNALS_H_

namespace gpuwatch {

// How long a handler waits for the report before giving up on it.
inline constexpr int kSignalReportWaitMs = 10000;

// Writes the report for `sig` on the background thread. `final` is true when
// the process dies right after (the default action follows); false when a
// handler the program installed before gpuwatch runs next.
using SignalReportFn = void (*)(int sig, bool final);

// Installs gpuwatch's handler for each of the signals above whose disposition
// is the default action, and chains to a handler the program installed
// before attach for SIGTERM, SIGINT, SIGHUP and SIGABRT. Ignored signals,
// `skip` (the snapshot signal) and program handlers of the fault signals are
// left alone. A handler asks the background thread for the report with one
// byte written to `request_fd` (Agent::request_pipe). Returns false (nothing
// installed) when there is no such descriptor.
bool InstallFatalSignalHandlers(int skip, SignalReportFn report, int request_fd);

// Called when the background thread was created: handlers hand their
// signals to it from then on, even before it runs.
void FatalSignalServerCreated();

// Called by the background thread when it starts: a fault on that thread
// itself does not wait for a report that thread would have to write.
void SetFatalSignalServerThread();

// The background thread read `byte` from the request pipe, neither 's' nor
// 'r': when it is a handler's request (one of the signals handled, with a
// handler waiting), writes the report and releases the handler; any other
// byte is ignored.
void ServeFatalSignalRequest(unsigned char byte);

// Whether a fatal signal's handler has asked for its report and waits (the
// background thread should leave what it is doing for it).
bool FatalSignalWaiting();

// In the child of fork(): requests go to `request_fd` (the child's own
// pipe), nothing pending, no server until its background thread starts.
void FatalSignalsAfterFork(int request_fd);

// "SIGTERM", ...; "signal N" for one without a name.
const char* FatalSignalName(int sig, char* buf, int size);

}  // namespace gpuwatch

#endif  // GPUWATCH_INTERPOSE_AGENT_FATAL_SIGNALS_H_
