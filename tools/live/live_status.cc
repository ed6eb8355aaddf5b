#include "tools/live/live_status.h"

#include <fstream>
#include <iterator>

#include "tools/live/live_answer.h"

namespace gpuwatch::tools {

std::string ThreadWhereabouts(const StatusThreadView& thread, uint64_t now_ns) {
  if (thread.call.empty()) return "no CUDA call in progress";
  std::string out = "in " + Printable(thread.call);
  // Its start is known once gpuwatch's thread has written the page.
  if (thread.call_start_ns != 0) {
    out += " for " + StatusDuration(StatusSince(thread.call_start_ns, now_ns));
  }
  if (!thread.site.empty()) out += " at " + Printable(thread.site);
  return out;
}

std::string CallInProgressText(const StatusView& view, uint64_t min_ns) {
  const StatusThreadView* t = LongestCall(view);
  if (t == nullptr || t->call_start_ns == 0) return "";
  const uint64_t lasted = StatusSince(t->call_start_ns, view.now_ns);
  if (lasted < min_ns) return "";
  std::string out = "in " + Printable(t->call) + " " + StatusDuration(lasted);
  if (!t->site.empty()) out += " at " + Printable(t->site);
  return out;
}

std::string ProcessState(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  const std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 2 >= stat.size()) return "";
  return stat.substr(paren + 2, 1);
}

std::vector<std::string> ProcessCommand(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline");
  const std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  size_t start = 0;
  while (start < raw.size()) {
    size_t end = raw.find('\0', start);
    if (end == std::string::npos) end = raw.size();
    args.push_back(raw.substr(start, end - start));
    start = end + 1;
  }
  return args;
}

}  // namespace gpuwatch::tools
