// GPUWATCH_EXITCODE's exit handler (reports.h), apart from the reports
// themselves: it reads what the exit report counted.
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "interpose/agent/reports.h"
#include "libgpuwatch/base/log.h"
#include "libgpuwatch/report/format.h"

namespace gpuwatch {

namespace {

// GPUWATCH_EXITCODE. An atexit handler cannot see the exit status; glibc's
// on_exit() handlers run in the same LIFO list and receive it (the value
// passed to exit() or returned from main). When it is 0 and the exit report
// counted leaked device memory, this handler flushes stdio and ends the
// process with _exit(N), as LeakSanitizer does: the exit handlers registered
// before it do not run. So it is registered as early as possible, always
// before the exit report's handler (it runs after the report was written):
// - from the preload constructor (LD_PRELOAD, `gpuwatch run`): that is before
//   __libc_start_main registers the loader's destructor pass, so it runs last
//   of all, after every library destructor, and the _exit skips only stdio's
//   final flush, which it does itself;
// - with CUDA_INJECTION64_PATH alone, at attach, inside the program's first
//   CUDA call: handlers the program registered before that call (static
//   destructors, say) do not run when the status is changed.
// It never writes the report itself: by then CUDA may be torn down.
void OnExitStatus(int status, void*) {
  Agent& agent = GetAgent();
  if (!agent.active.load() || agent.config().exitcode == 0 || status != 0) return;
  if (agent.reports.detached_ns.load() !=
      0) {  // not recorded to the end: no leak count can be trusted
    Warn("exit status 0 changed to %d: the run was not recorded to its end (GPUWATCH_EXITCODE)",
         agent.config().exitcode);
    std::fflush(nullptr);
    _exit(agent.config().exitcode);
  }
  if (!agent.reports.exit_leak_known.load() || agent.reports.exit_leaked_bytes.load() == 0) return;
  Warn("exit status 0 changed to %d: %s of device memory leaked (GPUWATCH_EXITCODE)",
       agent.config().exitcode, FormatBytes(agent.reports.exit_leaked_bytes.load()).c_str());
  std::fflush(nullptr);
  _exit(agent.config().exitcode);
}

std::atomic<bool> g_exit_status_handler{false};

}  // namespace

void RegisterExitStatusHandler() {
  if (g_exit_status_handler.exchange(true)) return;
  on_exit(OnExitStatus, nullptr);
}

}  // namespace gpuwatch
