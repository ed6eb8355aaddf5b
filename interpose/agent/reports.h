// Every report gpuwatch writes in a process, and when: at exit, on a fatal
// signal, on gpuwatch_snapshot() and the snapshot signal, at checkpoints, on
// an out-of-memory failure and when a context with live memory is destroyed.
// The last two happen inside a CUPTI callback: there only what that moment
// knows is captured (the live memory, the failed request, the device's free
// memory), and the report is written by the background thread, or at the
// latest before the exit report, never on the application's call.
#ifndef GPUWATCH_INTERPOSE_AGENT_REPORTS_H_
#define GPUWATCH_INTERPOSE_AGENT_REPORTS_H_

#include <cstdint>
#include <string>

#include "interpose/agent/agent.h"
#include "interpose/callbacks/callbacks.h"
#include "libgpuwatch/report/checkpoint.h"
#include "libgpuwatch/report/checkpoint_text.h"

namespace gpuwatch {

std::string HostName();

// The symbolizer that reports (and the live state) share, kept from one to
// the next; the caller holds report_mu.
Symbolizer* SharedSymbolizer(Agent& agent);
// The site resolver reports keep with it (the caller holds report_mu); null
// without stacks. It may replace the symbolizer (a library was unloaded since
// the last look): take the symbolizer after it, from agent.reports.
SiteResolver* SharedSites(Agent& agent);

// Under `gpuwatch run` (GPUWATCH_RUN_LOG), tells it a report was written:
// one line "TRIGGER<TAB>PATH<TAB>PID", appended with one write(2); trigger
// "cuda" (no path) when a process makes its first CUDA call.
void LogReport(const Agent& agent, const char* trigger, const std::string& path);

// Notices, once, that CUPTI was detached from under gpuwatch (mux::
// SelfDetached: another client's cuptiFinalize where gpuwatch could not share
// CUPTI): says so on stderr, marks gpuwatch as not recording (gates refuse to
// vouch) and every report from then on says since when. True once detached.
// Not for the callback path.
bool NoticeDetach(Agent& agent);

// Hands a report captured inside a callback to the background thread (the
// exit report writes it first where there is none).
void QueueReport(Agent& agent, PendingReport&& report);
// Callback hooks (callbacks.h): run inside the failing or destroying call.
// OnOutOfMemory is in captured_reports.cc, with gpuwatch_torch_oom().
void OnOutOfMemory(const OomEvent& event);
void OnContextDestroy();
void OnFirstCall();
// What the first CUDA call leaves to the background thread (the tool
// modules' ranges, the driver's functions gpuwatch calls); once, after
// OnFirstCall: later calls return at once.
void FirstCallWork();
// The driver's functions gpuwatch calls (DriverQueries), resolved once.
void ResolveDriverQueries(Agent& agent);
// CallbackHooks::mapped_size: the driver's cuMemGetAddressRange (resolved
// after the first CUDA call) of `address`; 0 when unknown.
uint64_t MappedSize(uint64_t address);

// Writes the reports callbacks queued; the background thread, on its wake pipe.
void WritePendingReports();

// The exit report's handler, registered once at the first CUDA call.
void RegisterExitHandler();
bool ExitHandlerRegistered();
// GPUWATCH_EXITCODE's handler (see reports.cc), registered as early as possible.
void RegisterExitStatusHandler();

// A fatal signal's report (fatal_signals.h), on the background thread.
void WriteSignalReport(int sig, bool final);

// Checkpoints (GPUWATCH_CHECKPOINT_SECONDS), looked at by the background
// thread once a second.
struct Checkpoints {
  CheckpointState last;
  // The text kept from one checkpoint to the next (a checkpoint re-makes
  // only what changed); other reports keep none.
  CheckpointText text;
};
void MaybeCheckpoint(Agent& agent, Checkpoints& c, uint64_t now);

// gpuwatch_live_since(): LiveSinceJson() of the session, under report_mu
// with the reports' kept symbolizer.
std::string LiveSince(Tracker::Point point);

// gpuwatch_snapshot(): 0 when written.
int WriteSnapshot(const char* label);

}  // namespace gpuwatch

#endif  // GPUWATCH_INTERPOSE_AGENT_REPORTS_H_
