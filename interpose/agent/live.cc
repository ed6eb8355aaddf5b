#include "interpose/agent/live.h"

#include <dlfcn.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>

#include "interpose/agent/device_identity.h"
#include "interpose/agent/fatal_signals.h"
#include "interpose/agent/reports.h"
#include "interpose/agent/status.h"
#include "interpose/agent/torch_blocks.h"
#include "libgpuwatch/analysis/site_resolver.h"
#include "libgpuwatch/base/cgroup.h"
#include "libgpuwatch/base/clock.h"
#include "libgpuwatch/base/fds.h"
#include "libgpuwatch/base/live_dir.h"
#include "libgpuwatch/base/log.h"
#include "libgpuwatch/base/proc_stat.h"
#include "libgpuwatch/base/read_file.h"
#include "libgpuwatch/base/status_page.h"
#include "libgpuwatch/report/live_state.h"

namespace gpuwatch {
namespace {

using DeviceTotalMemFn = int (*)(size_t* bytes, int device);

// The background thread's alone once the socket is open (attach and fork run
// before it starts).
struct Live {
  int fd = -1;
  std::string path;
  std::string dir;
  // In the node root (live_dir.h): who else may read the live state.
  bool node = false;
  NodeReader reader;
  uint64_t started_unix_ms = 0;
  LiveHistory history;
  LiveActivity activity;
  // The parent when the live view started (attach, or the fork), and its
  // start time: readers tell an orphan by it.
  pid_t parent_pid = 0;
  uint64_t parent_start_ticks = 0;
  // The container, unit and pod the process runs in, read when the live
  // view starts.
  CgroupLabels cgroup;
  // cuDeviceTotalMem_v2 per device, asked once (0: not yet, or unknown).
  std::array<uint64_t, kMaxTrackedDevices> device_total{};
  DeviceTotalMemFn device_total_mem = nullptr;
  bool driver_looked_up = false;
};

Live& State() {
  static Live* live = new Live;  // never destroyed: exit handlers may run after statics'
  return *live;
}

// The path's name in this process, so that CloseLiveSocket needs no string.
char g_unlink_path[sizeof(sockaddr_un::sun_path)] = {};

uint64_t UnixMs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000 + static_cast<uint64_t>(ts.tv_nsec) / 1000000;
}

bool Bind(Live& live, pid_t pid) {
  std::string problem;
  if (!live.node && !PrepareLiveDir(live.dir, /*create=*/true, &problem)) {
    Warn("no live view (gpuwatch top, gpuwatch exporter): %s", problem.c_str());
    return false;
  }
  const std::string path = LiveSocketPath(live.dir, pid);
  if (path.empty()) {
    Warn("no live view: the socket path in %s would be too long (set GPUWATCH_LIVE_DIR)",
         live.dir.c_str());
    return false;
  }
  const int fd = AboveStdio(socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (fd < 0) {
    Warn("no live view: socket: %s", std::strerror(errno));
    return false;
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  // A name with this pid is a leftover of this pid's last life (a process
  // that exec'ed, or an earlier process with the same pid killed with -9).
  unlink(path.c_str());
  if (bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(fd, 64) != 0) {
    Warn("no live view: cannot listen on %s: %s", path.c_str(), std::strerror(errno));
    close(fd);
    return false;
  }
  // The exporter's group connects too (connecting takes write permission).
  // 0666, not 0660: the socket's group is the directory's only while the
  // directory kept the root's setgid bit, which a chmod by this user (not in
  // that group) clears, as CheckOwnDir's does under umask 077. Who can reach
  // the name is what the directory says (0750, the root's group), and whom
  // the process answers is what the peer's credentials say.
  if (live.node && live.reader.group) chmod(path.c_str(), 0666);
  live.fd = fd;
  live.path = path;
  std::memcpy(g_unlink_path, path.c_str(), path.size() + 1);
  return true;
}

// The device's capacity, asked of the driver once per device (without a
// context: cuDeviceTotalMem needs none).
uint64_t DeviceTotal(Live& live, int device) {
  if (!live.driver_looked_up) {
    live.driver_looked_up = true;
    if (void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD)) {
      live.device_total_mem =
          reinterpret_cast<DeviceTotalMemFn>(dlsym(driver, "cuDeviceTotalMem_v2"));
    }
  }
  if (live.device_total[device] == 0 && live.device_total_mem != nullptr) {
    size_t bytes = 0;
    if (live.device_total_mem(&bytes, device) == 0) live.device_total[device] = bytes;
  }
  return live.device_total[device];
}

std::string BuildState(Agent& agent, Live& live, size_t top) {
  LiveInputs in;
  in.pid = getpid();
  in.host = HostName();
  in.rank = RankFromEnvironment([](const char* n) { return std::getenv(n); });  // NOLINT
  in.command = agent.attach.command;
  in.started_unix_ms = live.started_unix_ms;
  in.now_unix_ms = UnixMs();
  in.ooms = agent.reports.ooms.load();
  const Events events = agent.events();
  const TrackerSnapshot totals = events.Totals();
  const TransfersSnapshot transfers = events.TransferTotals();
  in.totals = &totals;
  in.transfers = &transfers;
  events.LiveDeviceBytesBySite(&in.sites);
  in.last_marks = events.LastMarks();
  in.history = &live.history;
  in.top = top;
  const std::shared_ptr<const ReportTorchBlocks> torch_blocks = LatestTorchBlocks();
  in.torch_blocks = torch_blocks.get();
  in.parent_pid = live.parent_pid;
  in.parent_start_ticks = live.parent_start_ticks;
  in.activity = &live.activity;
  in.now_ns = MonotonicNs();
  for (int d = 0; d < kMaxTrackedDevices; ++d) {
    if (totals.device_peak_bytes_by_device[d] != 0) in.device_total_bytes[d] = DeviceTotal(live, d);
  }
  in.device_identity = &DeviceIdentitiesFor(totals.device_peak_bytes_by_device);
  in.cgroup = live.cgroup;
  std::lock_guard<Mutex> lock(agent.reports.report_mu);  // the reports' symbolizer
  SiteResolver resolver(CurrentSession()->stacks(),
                        CurrentSession()->stacks() != nullptr ? SharedSymbolizer(agent) : nullptr,
                        CurrentSession()->alloc_fns());
  return BuildLiveState(in, &resolver);
}

// Each reader's time is bounded by deadlines, not by its progress: a reader
// that sends or takes a byte at a time gets no more than one that sends
// nothing (docs/reliability.md).
constexpr uint64_t kRequestNs = 200000000ULL;  // its request, from its accept
constexpr uint64_t kAnswerNs = 1000000000ULL;  // the answer, from the end of the request
constexpr uint64_t kTurnNs = 500000000ULL;     // no more readers accepted in a turn after this

// How often a wait for a reader looks whether a fatal signal's handler waits.
constexpr int kSignalCheckMs = 10;

// Waits until `fd` is ready for `events`; false when `deadline` (monotonic)
// passed first, or when a signal that ends the process waits for the
// background thread's report (the thread leaves the reader for it).
bool WaitFor(int fd, short events, uint64_t deadline) {
  for (;;) {
    if (FatalSignalWaiting()) return false;
    const uint64_t now = MonotonicNs();
    if (now >= deadline) return false;
    const int left_ms = static_cast<int>((deadline - now + 999999) / 1000000);
    pollfd ready{fd, events, 0};
    const int n = poll(&ready, 1, std::min(left_ms, kSignalCheckMs));
    if (n < 0 && errno != EINTR) return false;
    if (n > 0) return true;  // ready, or an error or hang-up the next call sees
  }
}

// The request: "top N\n" (the sites to list), or what came of it by
// `deadline`, or nothing.
size_t ReadRequest(int fd, uint64_t deadline) {
  char buf[64];
  size_t used = 0;
  while (used < sizeof(buf) - 1 && WaitFor(fd, POLLIN, deadline)) {
    const ssize_t n = recv(fd, buf + used, sizeof(buf) - 1 - used, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n <= 0) break;
    used += static_cast<size_t>(n);
    if (std::memchr(buf, '\n', used) != nullptr) break;
  }
  buf[used] = '\0';
  size_t top = kLiveDefaultTop;
  if (std::strncmp(buf, "top ", 4) == 0) {
    char* end = nullptr;
    const unsigned long n = std::strtoul(buf + 4, &end, 10);
    if (end != buf + 4 && n > 0) top = n < kLiveMaxTop ? n : kLiveMaxTop;
  }
  return top;
}

void Serve(Agent& agent, Live& live, int fd) {
  ucred peer{};
  socklen_t len = sizeof(peer);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0) return;
  const bool reader = live.node && (peer.uid == live.reader.uid ||
                                    (live.reader.group && peer.gid == live.reader.gid));
  if (peer.uid != geteuid() && !reader) return;  // another user's: nothing is said
  const size_t top = ReadRequest(fd, MonotonicNs() + kRequestNs);
  if (FatalSignalWaiting()) return;
  std::string state;
  try {
    state = BuildState(agent, live, top);
  } catch (...) {
    // Out of memory, most likely: the reader says so; the process goes on.
    state = "{\"error\":\"the live state could not be built\"}\n";
  }
  const uint64_t deadline = MonotonicNs() + kAnswerNs;
  size_t sent = 0;
  while (sent < state.size() && WaitFor(fd, POLLOUT, deadline)) {
    const ssize_t n =
        send(fd, state.data() + sent, state.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
}

// What the live view starts from, at attach and in a fork's child: the
// parent now, and no CUDA activity yet.
void StartLive(Live& live) {
  live.started_unix_ms = UnixMs();
  live.activity.Reset(MonotonicNs(), live.started_unix_ms);
  live.parent_pid = getppid();
  const ProcStat parent = ReadProcStat(live.parent_pid);
  live.parent_start_ticks = parent.known ? parent.start_ticks : 0;
  if (!parent.known) live.parent_pid = 0;  // gone already: unknown
  std::string cgroup;
  std::string problem;
  live.cgroup = ReadRegularFile("/proc/self/cgroup", uint64_t{64} << 10, &cgroup, &problem)
                    ? ParseCgroup(cgroup)
                    : CgroupLabels{};
  AddPodEnvironment([](const char* n) { return std::getenv(n); }, &live.cgroup);  // NOLINT
}

// The user's directory in the node root when the root exists and is safe
// (live_dir.h); false, with one line when it exists but cannot be used,
// for the per-user directory.
bool UseNodeDir(Live& live) {
  const std::string root =
      NodeDirFromEnvironment([](const char* n) { return std::getenv(n); });  // NOLINT
  std::string problem;
  bool absent = false;
  live.node = PrepareNodeUserDir(root, &live.dir, &live.reader, &absent, &problem);
  if (!live.node && !absent) {
    Warn("the live view is in the per-user directory, not the node's: %s", problem.c_str());
  }
  return live.node;
}

}  // namespace

void OpenLiveSocket(Agent& agent) {
  if (!agent.config().live) return;
  Live& live = State();
  if (!agent.config().live_dir.empty()) {
    live.dir = agent.config().live_dir;
  } else if (!UseNodeDir(live)) {
    live.dir = LiveDirFromEnvironment([](const char* n) { return std::getenv(n); });  // NOLINT
  }
  StartLive(live);
  if (!Bind(live, getpid())) return;
  OpenStatus(live.dir);
  // Removed at exit even when no CUDA call registers the exit report's handler.
  std::atexit(CloseLiveSocket);
}

int LiveSocketFd() { return State().fd; }

void LiveTick(Agent& agent, uint64_t checkpoint_ns) {
  Live& live = State();
  if (live.fd < 0) return;
  StatusTick(agent, checkpoint_ns);
  const Events events = agent.events();
  const TrackerSnapshot totals = events.Totals();
  events.LiveDeviceBytesBySite(&agent.background.site_scan);
  live.activity.Tick(totals, MonotonicNs(), UnixMs());
  // Which GPU each device that held memory is, asked once per device: known
  // (published) before a report or a reader needs it.
  DeviceIdentitiesFor(totals.device_peak_bytes_by_device);
  live.history.Add(totals.time_ns, totals.device_current_bytes,
                   totals.copies[static_cast<int>(CopyKind::kHostToDevice)].bytes,
                   totals.copies[static_cast<int>(CopyKind::kDeviceToHost)].bytes,
                   &agent.background.site_scan);
}

void ServeLiveReaders(Agent& agent) {
  Live& live = State();
  // A burst of readers is answered in turns of at most this many, and of
  // kTurnNs (and the last reader's deadlines), so that the thread's other
  // work waits for no more.
  const uint64_t turn_end = MonotonicNs() + kTurnNs;
  for (int i = 0; i < 16 && MonotonicNs() < turn_end && !FatalSignalWaiting(); ++i) {
    const int fd = AboveStdio(accept4(live.fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (fd < 0) return;
    Serve(agent, live, fd);
    close(fd);
  }
}

void CloseLiveSocket() {
  RemoveStatusPageFile();
  if (g_unlink_path[0] != '\0') unlink(g_unlink_path);
  g_unlink_path[0] = '\0';
}

void LiveAfterFork(Agent& agent) {
  DetachStatusPage();  // the parent's
  Live& live = State();
  if (live.fd < 0) return;
  close(live.fd);  // the parent's: its name stays
  live.fd = -1;
  g_unlink_path[0] = '\0';
  live.history = LiveHistory();
  StartLive(live);
  if (Bind(live, getpid())) OpenStatus(live.dir);
}

}  // namespace gpuwatch
