#include "tools/commands/why_command.h"

#include <cstdint>

#include "libgpuwatch/report/format.h"
#include "tools/live/live_answer.h"
#include "tools/live/live_client.h"
#include "tools/live/live_status.h"

namespace gpuwatch::tools {
namespace {

// gpuwatch's thread writes the page once a second: a page older than this
// was written by a thread that cannot run (a stopped process, a thread
// blocked).
constexpr uint64_t kStaleNs = 3000000000ULL;

}  // namespace

std::vector<std::string> RenderWhy(const StatusView& view, const std::string& state,
                                   const std::string& command) {
  std::vector<std::string> lines;
  std::string head = "pid " + std::to_string(view.pid);
  if (!command.empty()) head += ": " + command;
  if (state == "T" || state == "t") head += "  [stopped]";
  if (state == "Z") head += "  [zombie]";
  if (state.empty()) head += "  [gone]";
  lines.push_back(head);
  std::string holds = "holds: ";
  if (view.updated_ns == 0) {
    holds += "not known yet (gpuwatch's thread has not written its page)";
  } else if (view.device_bytes.empty()) {
    holds += "no device memory";
  } else {
    for (size_t i = 0; i < view.device_bytes.size(); ++i) {
      if (i != 0) holds += ", ";
      holds += FormatBytes(view.device_bytes[i].second) + " on device " +
               std::to_string(view.device_bytes[i].first);
    }
  }
  lines.push_back(holds);
  for (const StatusThreadView& t : view.threads) {
    std::string line = "thread " + std::to_string(t.tid) + ": " + ThreadWhereabouts(t, view.now_ns);
    if (t.torn) line += " (stopped while it wrote its status)";
    lines.push_back(line);
    if (!t.last_call.empty() && t.last_end_ns != 0) {
      lines.push_back("  last completed: " + Printable(t.last_call) + ", " +
                      StatusDuration(StatusSince(t.last_end_ns, view.now_ns)) + " ago (" +
                      std::to_string(t.calls) + (t.calls == 1 ? " call)" : " calls)"));
    }
  }
  if (view.threads.empty()) lines.emplace_back("no thread has made a CUDA call");
  if (view.threads_without_slot > 0) {
    lines.push_back(std::to_string(view.threads_without_slot) +
                    " more threads made CUDA calls (not shown: the page has " +
                    std::to_string(kStatusThreadSlots) + " slots)");
  }
  if (view.checkpoint_ns != 0) {
    lines.push_back("last checkpoint: " + Printable(view.checkpoint_path) + ", " +
                    StatusDuration(StatusSince(view.checkpoint_ns, view.now_ns)) + " ago");
  } else {
    lines.emplace_back("last checkpoint: none");
  }
  if (view.updated_ns != 0 && StatusSince(view.updated_ns, view.now_ns) > kStaleNs) {
    lines.push_back("gpuwatch's thread last wrote this " +
                    StatusDuration(StatusSince(view.updated_ns, view.now_ns)) +
                    " ago: the process is stopped or that thread cannot run");
  }
  if (view.process_torn) lines.emplace_back("(the process part was being written when read)");
  return lines;
}

int WhyCommand(const WhyOptions& options, FILE* out) {
  std::string dir;
  std::string problem;
  if (!ResolveLiveDir(options.dir, &dir, &problem)) {
    std::fprintf(stderr, "gpuwatch why: %s\n", Printable(problem).c_str());
    return 2;
  }
  StatusView view;
  if (!ReadStatusPage(StatusPagePath(dir, options.pid), &view, &problem)) {
    const std::string state = ProcessState(options.pid);
    if (state.empty()) {
      std::fprintf(stderr, "gpuwatch why: no process %d\n", static_cast<int>(options.pid));
    } else if (problem.rfind("no status page", 0) == 0) {
      std::fprintf(stderr,
                   "gpuwatch why: gpuwatch is not in process %d (no status page in %s; is "
                   "GPUWATCH_LIVE off, or is it another user's?)\n",
                   static_cast<int>(options.pid), Printable(dir).c_str());
    } else {
      std::fprintf(stderr, "gpuwatch why: %s\n", Printable(problem).c_str());
    }
    return 1;
  }
  std::string command;
  for (const std::string& arg : ProcessCommand(options.pid)) {
    command += (command.empty() ? "" : " ") + Printable(arg);
  }
  for (const std::string& line : RenderWhy(view, ProcessState(options.pid), command)) {
    std::fprintf(out, "%s\n", line.c_str());
  }
  return 0;
}

}  // namespace gpuwatch::tools
