#include "tools/commands/top_command.h"

#include <langinfo.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <clocale>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <limits>

#include "libgpuwatch/base/clock.h"
#include "tools/commands/top_cells.h"
#include "tools/live/live_holders.h"
#include "tools/live/live_known.h"
#include "tools/live/live_status.h"

namespace gpuwatch::tools {
namespace {

using top_cells::Ago;
using top_cells::Bytes;
using top_cells::Columns;
using top_cells::Fit;
using top_cells::FitCut;
using top_cells::Rate;
using top_cells::Right;
using top_cells::Short;
using top_cells::ShortPath;
using top_cells::Signed;
using top_cells::Sparkline;
using top_cells::Uptime;

constexpr int kScanTimeoutMs = 500;
constexpr size_t kLiveTopSites = 50;  // asked of each process
constexpr int kRefreshMs = 1000;

// The program's name and arguments, shortest first: "train.py --lr 3" for
// "python3 /x/train.py --lr 3" reads better than the interpreter. What a
// terminal would act on (an escape, a newline) is shown, not sent.
std::string CommandOf(const LiveState& state) {
  std::string out;
  for (size_t i = 0; i < state.command.size(); ++i) {
    std::string a = state.command[i];
    if (i == 0) a = a.substr(a.rfind('/') + 1);
    if (!out.empty()) out += ' ';
    out += Printable(a);
  }
  return out.empty() ? "?" : out;
}

double SortKey(const LiveState& state, const std::string& sort) {
  if (sort == "growth") return state.device_growth.value_or(0);
  if (sort == "peak") return Bytes(state.peak_bytes);
  return Bytes(state.live_bytes);
}

double SiteKey(const LiveSite& site, const std::string& sort) {
  if (sort == "growth") return site.growth.value_or(0);
  return Bytes(site.live_bytes);
}

// A sample list's columns: live, growth/min, growth/mark, history, site.
constexpr size_t kSparkWidth = 20;

// The STATE column: running, idle, stopped, orphaned, stop+orph, idle+orph.
constexpr size_t kStateWidth = 9;

// The selected process's line under its figures when it is not simply
// running, or did not answer: what it is, since when, and where what is
// shown comes from. In `width` columns: when it does not fit, its details
// (the parent, the last activity) go first, then the start of a
// checkpoint's path, each replaced by `ellipsis`.
std::string HolderLine(const LiveProcess& p, const HolderState& s, size_t width,
                       const std::string& ellipsis) {
  std::string head = HolderStateName(s);
  if (s.stopped) head += " (" + std::string(p.proc.state == 't' ? "by a tracer" : "SIGSTOP") + ")";
  std::vector<std::string> details;
  if (const auto parent = ParentAtStart(p); s.orphaned && parent.has_value()) {
    details.push_back(", parent " + std::to_string(parent->pid) + " gone (now " +
                      std::to_string(p.proc.ppid) + ")");
  }
  if (s.idle_ns.has_value()) details.push_back(", last CUDA activity " + Ago(*s.idle_ns / 1000000));
  std::string tail;  // what is known of a silent process: tail + path + after
  std::string path;
  std::string after;
  if (!p.answered && p.known_from.empty()) tail = ": no answer; nothing known of what it holds";
  if (!p.answered && !p.known_from.empty()) {
    const std::string checkpoint = "checkpoint ";
    tail = ": no answer; as of its ";
    if (p.known_from == "answer") {
      tail += "last answer";
    } else if (p.known_from.starts_with(checkpoint)) {
      tail += checkpoint;
      path = Printable(p.known_from.substr(checkpoint.size()));
    } else {
      tail += Printable(p.known_from);
    }
    after = ", " + Ago(p.known_age_ms);
  }
  const size_t known_cols = Columns(tail) + Columns(path) + Columns(after);
  size_t kept = details.size();
  const auto start = [&] {
    std::string line = head;
    for (size_t i = 0; i < kept; ++i) line += details[i];
    return line + (kept < details.size() ? ellipsis : "") + tail;
  };
  while (kept > 0 && Columns(start()) - Columns(tail) + known_cols > width) --kept;
  const size_t fixed = Columns(start()) + Columns(after);
  if (!path.empty() && fixed + Columns(path) > width) {
    path =
        ShortPath(path, std::max(width - std::min(width, fixed), Columns(ellipsis) + 1), ellipsis);
  }
  return FitCut(start() + path + after, width, ellipsis);
}

// A CUDA call in progress this long is shown under its process's row.
constexpr uint64_t kShowCallNs = 1000000000ULL;

}  // namespace

std::vector<const LiveProcess*> SortedProcesses(const LiveScan& scan, const std::string& sort) {
  std::vector<const LiveProcess*> list;
  for (const LiveProcess& p : scan.processes) list.push_back(&p);
  for (const LiveProcess& p : scan.silent) list.push_back(&p);
  std::stable_sort(list.begin(), list.end(), [&sort](const LiveProcess* a, const LiveProcess* b) {
    if (sort == "pid") return a->pid < b->pid;
    const double ka = SortKey(a->state, sort);
    const double kb = SortKey(b->state, sort);
    return ka != kb ? ka > kb : a->pid < b->pid;
  });
  return list;
}

std::vector<std::string> RenderTopFrame(const LiveScan& scan, const TopView& view) {
  const size_t width = static_cast<size_t>(std::max(view.width, 60));
  const std::string ellipsis = view.utf8 ? "\u2026" : "...";
  std::vector<std::string> lines;
  const std::vector<const LiveProcess*> procs = SortedProcesses(scan, view.sort);
  const LiveProcess* selected = procs.empty() ? nullptr : procs.front();
  for (const LiveProcess* p : procs) {
    if (p->pid == view.selected) selected = p;
  }

  // How many lines each part gets: with a height, the processes take up to a
  // third, the selected process's sites the rest but the last line (keys).
  size_t process_rows = procs.size();
  size_t site_rows = static_cast<size_t>(std::max(view.sites, 0));
  if (view.height > 0) {
    const size_t h = static_cast<size_t>(std::max(view.height, 10));
    process_rows = std::min(procs.size(), std::max<size_t>(3, (h - 6) / 3));
    site_rows = h - 6 - process_rows;  // header, 2 column heads, blank, process line, keys
    // PyTorch's line under the process line, and what it is doing.
    if (selected != nullptr && selected->state.torch.has_value() && site_rows > 0) --site_rows;
    if (selected != nullptr && site_rows > 0 &&
        (!selected->answered ||
         HolderStateName(HolderStateOf(*selected, view.idle_after_ns)) != "running")) {
      --site_rows;
    }
  }

  char head[256];
  std::snprintf(head, sizeof(head), "gpuwatch top  %s  %zu process%s  sort: %s", view.clock.c_str(),
                procs.size(), procs.size() == 1 ? "" : "es", view.sort.c_str());
  std::string first = head;
  const std::string dir = Printable(view.dir);
  if (Columns(first) + 2 + Columns(dir) <= width) first = Fit(first, width - Columns(dir)) + dir;
  lines.push_back(Fit(first, width, false));

  // PID RANK COMMAND... STATE LIVE PEAK GROW/MIN H2D/s D2H/s
  const size_t fixed = 1 + 7 + 1 + 4 + 1 + 1 + kStateWidth + 1 + 7 + 1 + 7 + 1 + 8 + 1 + 8 + 1 + 8;
  const size_t command_width = width - fixed;
  lines.push_back(" " + Right("PID", 7) + " " + Fit("RANK", 4) + " " +
                  Fit("COMMAND", command_width) + " " + Fit("STATE", kStateWidth) + " " +
                  Right("LIVE", 7) + " " + Right("PEAK", 7) + " " + Right("GROW/MIN", 8) + " " +
                  Right("H2D/s", 8) + " " + Right("D2H/s", 8));
  // The window of rows keeps the selected process in view.
  size_t first_row = 0;
  for (size_t i = 0; i < procs.size(); ++i) {
    if (procs[i] == selected && i >= process_rows) first_row = i + 1 - process_rows;
  }
  for (size_t i = first_row; i < procs.size() && i < first_row + process_rows; ++i) {
    const LiveProcess& p = *procs[i];
    const LiveState& st = p.state;
    const std::string rank = st.rank.empty() ? "-" : Printable(st.rank);
    // A process that did not answer: what is known of it, marked '~' (as
    // of its earlier answer or checkpoint), or '?' (nothing is known).
    const bool known = p.answered || !p.known_from.empty();
    const std::string mark = p.answered ? "" : known ? "~" : "?";
    lines.push_back(std::string(procs[i] == selected ? ">" : " ") +
                    Right(std::to_string(p.pid), 7) + " " + Fit(rank, 4) + " " +
                    Fit(known ? CommandOf(st) : "(no answer)", command_width) + " " +
                    Fit(HolderStateShort(HolderStateOf(p, view.idle_after_ns)), kStateWidth) + " " +
                    Right(known ? mark + Short(Bytes(st.live_bytes)) : "?", 7) + " " +
                    Right(known ? mark + Short(Bytes(st.peak_bytes)) : "?", 7) + " " +
                    Right(p.answered ? Signed(st.device_growth) : "-", 8) + " " +
                    Right(p.answered ? Rate(st.h2d_bytes_per_s) : "-", 8) + " " +
                    Right(p.answered ? Rate(st.d2h_bytes_per_s) : "-", 8));
    // A call in progress for a second or more (its status page), and a
    // process that did not answer read from its page.
    std::string call;
    if (p.status.has_value()) call = CallInProgressText(*p.status, kShowCallNs);
    if (!p.answered && p.status.has_value()) {
      call += std::string(call.empty() ? "" : "  ") + "(no answer: its status page)";
    }
    if (!call.empty()) lines.push_back(FitCut(std::string(9, ' ') + call, width, ellipsis));
  }
  if (procs.empty()) lines.push_back(" (no process under gpuwatch here)");
  lines.emplace_back();

  if (selected != nullptr) {
    const LiveState& st = selected->state;
    std::string line = "pid " + std::to_string(selected->pid) + "  " + Short(Bytes(st.live_bytes)) +
                       " live in " + std::to_string(st.live_count) + ", peak " +
                       Short(Bytes(st.peak_bytes)) + "  " + std::to_string(st.allocs) +
                       " allocs  " + std::to_string(st.ooms) + " OOMs  " +
                       std::to_string(st.marks) + " marks  up " + Uptime(st.uptime_ns);
    // Nothing is known of a process that did not answer: its pid alone.
    if (!selected->answered && selected->known_from.empty())
      line = "pid " + std::to_string(selected->pid);
    lines.push_back(Fit(line, width, false));
    const HolderState holder = HolderStateOf(*selected, view.idle_after_ns);
    if (!selected->answered || holder.stopped || holder.orphaned || holder.idle) {
      lines.push_back(HolderLine(*selected, holder, width, ellipsis));
    }
    if (st.torch.has_value()) {
      lines.push_back(Fit("PyTorch (at " + Printable(st.torch->moment) +
                              "): " + Short(Bytes(st.torch->reserved_bytes)) + " reserved, " +
                              Short(Bytes(st.torch->allocated_bytes)) + " allocated in " +
                              std::to_string(st.torch->segments) +
                              (st.torch->segments == 1 ? " segment" : " segments"),
                          width, false));
    }
    const size_t site_width = width - (2 + 7 + 1 + 8 + 1 + 8 + 2 + kSparkWidth + 2);
    lines.push_back("  " + Right("LIVE", 7) + " " + Right("GROW/MIN", 8) + " " + Right("/MARK", 8) +
                    "  " + Fit("LAST 60 s", kSparkWidth) + "  " + Fit("SITE", site_width, false));
    // One row per location: a helper's line reached from many call paths
    // is one row, with how many.
    std::vector<LiveSite> grouped = st.sites;
    GroupSitesByLocation(&grouped, st.history_interval_ms);
    std::vector<const LiveSite*> sites;
    sites.reserve(grouped.size());
    for (const LiveSite& s : grouped) sites.push_back(&s);
    std::stable_sort(sites.begin(), sites.end(), [&view](const LiveSite* a, const LiveSite* b) {
      return SiteKey(*a, view.sort) > SiteKey(*b, view.sort);
    });
    const uint64_t other_count = st.other_count;
    // When not all fit, the last row says how many more there are.
    const bool all_fit = sites.size() + (other_count > 0 ? 1 : 0) <= site_rows;
    const size_t listed =
        all_fit ? sites.size() : std::min(sites.size(), site_rows - std::min<size_t>(site_rows, 1));
    size_t shown = 0;
    for (const LiveSite* s : sites) {
      if (shown == listed) break;
      std::string where = s->location.empty() ? "?" : Printable(s->location);
      if (!s->function.empty()) where += " (" + Printable(s->function) + ")";
      if (s->call_paths > 1) where += ", " + std::to_string(s->call_paths) + " call paths";
      lines.push_back("  " + Right(Short(Bytes(s->live_bytes)), 7) + " " +
                      Right(Signed(s->growth), 8) + " " + Right(Signed(s->growth_per_mark), 8) +
                      "  " + Sparkline(s->history, kSparkWidth, view.utf8) + "  " +
                      Fit(where, site_width, false));
      ++shown;
    }
    const size_t more = sites.size() - shown + other_count;
    if (more > 0 && site_rows > 0) {
      uint64_t more_bytes = st.other_bytes;
      for (size_t i = shown; i < sites.size(); ++i) more_bytes += sites[i]->live_bytes;
      lines.push_back("  " + Right(Short(Bytes(more_bytes)), 7) + " in " + std::to_string(more) +
                      " more site" + (more == 1 ? "" : "s"));
    }
    if (sites.empty() && other_count == 0) {
      lines.emplace_back(!selected->answered && st.live_bytes > 0
                             ? "  (its sites are not known without its answer)"
                             : "  (no device memory live)");
    }
  }
  for (const std::string& problem : scan.problems) {
    lines.push_back(Fit(Printable(problem), width, false));
  }
  if (view.height > 0) {
    const size_t h = static_cast<size_t>(view.height);
    if (lines.size() > h - 1) lines.resize(h - 1);
    while (lines.size() < h - 1) lines.emplace_back();
    lines.push_back(Fit("up/down select  s sort (live, growth, peak, pid)  q quit", width, false));
  }
  for (std::string& l : lines) l = Fit(l, width, false);
  return lines;
}

namespace {

std::atomic<bool> g_stop{false};
std::atomic<bool> g_resized{false};

void OnStop(int) { g_stop.store(true); }
void OnResize(int) { g_resized.store(true); }

std::string Clock() {
  const time_t now = time(nullptr);
  tm local{};
  localtime_r(&now, &local);
  char buf[16];
  std::strftime(buf, sizeof(buf), "%H:%M:%S", &local);
  return buf;
}

bool Utf8Locale() {
  std::setlocale(LC_CTYPE, "");
  const char* codeset = nl_langinfo(CODESET);
  return codeset != nullptr && std::strcmp(codeset, "UTF-8") == 0;
}

// The terminal in raw mode for the view's life, restored however it ends.
class RawTerminal {
 public:
  explicit RawTerminal(int fd) : fd_(fd) {
    if (tcgetattr(fd_, &saved_) != 0) return;
    termios raw = saved_;
    raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    ok_ = tcsetattr(fd_, TCSANOW, &raw) == 0;
  }
  ~RawTerminal() {
    if (ok_) tcsetattr(fd_, TCSANOW, &saved_);
  }
  RawTerminal(const RawTerminal&) = delete;
  RawTerminal& operator=(const RawTerminal&) = delete;
  bool ok() const { return ok_; }

 private:
  int fd_;
  termios saved_{};
  bool ok_ = false;
};

void WriteAll(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

// Keys read since the last frame; true when the view must quit.
bool HandleKeys(const std::string& keys, const LiveScan& scan, TopView* view) {
  static const char* const kSorts[] = {"live", "growth", "peak", "pid"};
  const std::vector<const LiveProcess*> procs = SortedProcesses(scan, view->sort);
  auto index_of_selected = [&]() -> size_t {
    for (size_t i = 0; i < procs.size(); ++i) {
      if (procs[i]->pid == view->selected) return i;
    }
    return 0;
  };
  for (size_t i = 0; i < keys.size(); ++i) {
    const char c = keys[i];
    int move = 0;
    if (c == 'q' || c == 'Q' || c == 3 /* Ctrl-C */) return true;
    if (c == 'j') move = 1;
    if (c == 'k') move = -1;
    if (c == 0x1b && i + 2 < keys.size() && keys[i + 1] == '[') {
      if (keys[i + 2] == 'B') move = 1;
      if (keys[i + 2] == 'A') move = -1;
      i += 2;
    }
    if (c == 's') {
      size_t k = 0;
      while (k < 4 && view->sort != kSorts[k]) ++k;
      view->sort = kSorts[(k + 1) % 4];
    }
    if (move != 0 && !procs.empty()) {
      const size_t at = index_of_selected();
      const size_t next = move > 0 ? std::min(at + 1, procs.size() - 1) : (at == 0 ? 0 : at - 1);
      view->selected = procs[next]->pid;
    }
  }
  return false;
}

int Interactive(const std::string& dir, TopView view, int timeout_ms) {
  if (isatty(STDIN_FILENO) == 0 || isatty(STDOUT_FILENO) == 0) {
    std::fprintf(stderr, "gpuwatch top: not a terminal; use --once for one frame as text\n");
    return 2;
  }
  RawTerminal terminal(STDIN_FILENO);
  if (!terminal.ok()) {
    std::fprintf(stderr, "gpuwatch top: cannot set the terminal's mode: %s\n",
                 std::strerror(errno));
    return 2;
  }
  struct sigaction action {};
  action.sa_handler = OnStop;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGHUP, &action, nullptr);
  action.sa_handler = OnResize;
  sigaction(SIGWINCH, &action, nullptr);
  WriteAll(STDOUT_FILENO, "\x1b[?1049h\x1b[?25l");  // the alternate screen, no cursor
  LiveScan scan;
  LiveKnown known;  // what earlier scans saw of processes that stop answering
  bool rescan = true;
  while (!g_stop.load()) {
    winsize ws{};
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) {
      view.width = std::max<int>(ws.ws_col, 60);
      view.height = std::max<int>(ws.ws_row, 10);
    } else {
      view.width = 80;
      view.height = 24;
    }
    if (rescan) {
      scan = ScanLive(dir, kLiveTopSites, timeout_ms);
      known.Update(&scan, ClockNs(CLOCK_REALTIME) / 1000000);
    }
    view.clock = Clock();
    std::string frame = "\x1b[H";
    for (const std::string& line : RenderTopFrame(scan, view)) frame += line + "\x1b[K\r\n";
    frame.resize(frame.size() - 2);  // no scroll past the last line
    frame += "\x1b[J";
    WriteAll(STDOUT_FILENO, frame);
    // Until the next refresh, a key or a resize.
    pollfd in{STDIN_FILENO, POLLIN, 0};
    const int n = poll(&in, 1, kRefreshMs);
    rescan = n == 0;
    if (n > 0) {
      char buf[64];
      const ssize_t r = read(STDIN_FILENO, buf, sizeof(buf));
      if (r == 0) break;  // the terminal is gone
      if (r > 0 && HandleKeys(std::string(buf, static_cast<size_t>(r)), scan, &view)) break;
    }
    if (g_resized.exchange(false)) rescan = false;
  }
  WriteAll(STDOUT_FILENO, "\x1b[?25h\x1b[?1049l");
  return 0;
}

}  // namespace

int TopCommand(const TopOptions& options, FILE* out) {
  std::string dir;
  uint64_t idle_after_ns = 0;
  if (!ResolveReaderOptions("top", options.dir, options.idle_after_s, &dir, &idle_after_ns)) {
    return 2;
  }
  TopView view;
  view.idle_after_ns = idle_after_ns;
  view.sort = options.sort;
  view.selected = options.pid;
  view.sites = options.sites;
  view.width = options.width;
  view.dir = dir;
  view.utf8 = Utf8Locale();
  if (!options.once) {
    return Interactive(dir, view, options.timeout_ms > 0 ? options.timeout_ms : kScanTimeoutMs);
  }
  LiveScan scan = ScanLive(dir, std::max<size_t>(kLiveTopSites, static_cast<size_t>(options.sites)),
                           options.timeout_ms > 0 ? options.timeout_ms : kScanTimeoutMs * 4);
  LiveKnown().Update(&scan,
                     ClockNs(CLOCK_REALTIME) / 1000000);  // no earlier scan: their checkpoints
  view.clock = Clock();
  for (const std::string& line : RenderTopFrame(scan, view))
    std::fprintf(out, "%s\n", line.c_str());
  return 0;
}

}  // namespace gpuwatch::tools
