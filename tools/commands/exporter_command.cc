// `gpuwatch exporter`: the live state of every process under gpuwatch on this
// machine (tools/live/live_client.h), read at each scrape, as Prometheus metrics
// (tools/live/live_metrics.h) on /metrics, or written to a file for
// node_exporter's textfile collector. docs/prometheus.md describes it.
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <exception>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "libgpuwatch/base/clock.h"
#include "prometheus/collectable.h"
#include "prometheus/exposer.h"
#include "prometheus/text_serializer.h"
#include "tools/commands.h"
#include "tools/commands/listen_address.h"
#include "tools/commands/tcp_relay.h"
#include "tools/live/live_client.h"
#include "tools/live/live_holders.h"
#include "tools/live/live_known.h"
#include "tools/live/live_metrics.h"

namespace gpuwatch::tools {
namespace {

// The HTTP server's worker threads, and how long one waits for a client's
// request: a client that sends its headers a byte at a time holds a worker
// that long at most, and a scrape still finds a free one while fewer than
// kHttpThreads such clients are connected (civetweb's default is 30 s).
constexpr int kHttpThreads = 16;
constexpr int kHttpRequestTimeoutMs = 5000;

// Each problem line once, on stderr, when it first appears (a process that
// stays stopped is one line, not one a scrape). Scrapes run on several
// threads at once.
class ProblemLog {
 public:
  void Note(const std::vector<std::string>& problems) {
    std::lock_guard<std::mutex> lock(mu_);
    std::set<std::string> now(problems.begin(), problems.end());
    for (const std::string& p : now) {
      if (last_.count(p) == 0) std::fprintf(stderr, "gpuwatch exporter: %s\n", p.c_str());
    }
    last_ = std::move(now);
  }

 private:
  std::mutex mu_;
  std::set<std::string> last_;
};

// A scan; whatever it throws (out of memory) is one problem of the scrape,
// never the exporter's end.
LiveScan SafeScan(const std::string& dir, bool node, size_t top, int timeout_ms) {
  try {
    return node ? ScanNode(dir, top, timeout_ms) : ScanLive(dir, top, timeout_ms);
  } catch (const std::exception& e) {
    LiveScan failed;
    failed.problems.push_back(std::string("the scan failed: ") + e.what());
    return failed;
  }
}

// A scan, with what is known of the processes that did not answer
// (live_known.h: `known` keeps what they answered on earlier scans).
LiveScan ScanKnown(const std::string& dir, bool node, size_t top, int timeout_ms, LiveKnown* known,
                   std::mutex* known_mu) {
  LiveScan scan = SafeScan(dir, node, top, timeout_ms);
  try {
    const std::lock_guard<std::mutex> lock(*known_mu);
    known->Update(&scan, ClockNs(CLOCK_REALTIME) / 1000000);
  } catch (const std::exception& e) {
    scan.problems.push_back(std::string("what is known of the silent processes: ") + e.what());
  }
  return scan;
}

class LiveCollectable : public prometheus::Collectable {
 public:
  LiveCollectable(std::string dir, bool node, size_t top, int timeout_ms, uint64_t idle_after_ns)
      : dir_(std::move(dir)),
        node_(node),
        top_(top),
        timeout_ms_(timeout_ms),
        idle_after_ns_(idle_after_ns) {}

  // civetweb answers on worker threads with 100 KiB stacks (Debian's build);
  // parsing the processes' answers needs more (a sanitizer build overflowed
  // it), so a scrape runs on a thread with the default stack, or here where
  // no thread can be started.
  std::vector<prometheus::MetricFamily> Collect() const override {
    std::vector<prometheus::MetricFamily> families;
    const auto collect = [&] {
      const LiveScan scan = ScanKnown(dir_, node_, top_, timeout_ms_, &known_, &known_mu_);
      log_.Note(scan.problems);
      try {
        families = LiveMetrics(scan, {.top = top_, .idle_after_ns = idle_after_ns_});
      } catch (const std::exception& e) {
        LiveScan failed;
        failed.problems.push_back(e.what());
        families = LiveMetrics(failed, {});
      }
    };
    try {
      std::thread(collect).join();
    } catch (const std::system_error&) {
      collect();
    }
    return families;
  }

 private:
  std::string dir_;
  bool node_;
  size_t top_;
  int timeout_ms_;
  uint64_t idle_after_ns_;
  mutable ProblemLog log_;
  mutable std::mutex known_mu_;  // scrapes run on several threads at once
  mutable LiveKnown known_;
};

// Writes the metrics to DIR/gpuwatch.prom at once: a temporary file in DIR,
// renamed over it, so that node_exporter never reads half a file.
bool WriteTextfile(const std::string& dir, const std::vector<prometheus::MetricFamily>& families,
                   std::string* problem) {
  const std::string path = dir + "/gpuwatch.prom";
  std::string temp = dir + "/.gpuwatch.prom.XXXXXX";
  const int fd = mkostemp(temp.data(), O_CLOEXEC);
  if (fd < 0) {
    *problem = "cannot write " + path + ": " + std::strerror(errno);
    return false;
  }
  const std::string text = prometheus::TextSerializer().Serialize(families);
  size_t done = 0;
  bool ok = fchmod(fd, 0644) == 0;
  while (ok && done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ok = false;
      break;
    }
    done += static_cast<size_t>(n);
  }
  ok = ok && fsync(fd) == 0;
  const int err = errno;
  ok = close(fd) == 0 && ok;
  if (ok && rename(temp.c_str(), path.c_str()) == 0) return true;
  *problem = "cannot write " + path + ": " + std::strerror(ok ? errno : err);
  unlink(temp.c_str());
  return false;
}

// SIGINT and SIGTERM, blocked in every thread (the HTTP server's inherit the
// mask) and taken by WaitForStop.
sigset_t StopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

// True when a stop signal came within `seconds` (< 0: wait for one).
bool WaitForStop(const sigset_t& set, int seconds) {
  if (seconds < 0) {
    int sig = 0;
    while (sigwait(&set, &sig) != 0) {
    }
    return true;
  }
  timespec left{seconds, 0};
  timespec end{};
  clock_gettime(CLOCK_MONOTONIC, &end);
  end.tv_sec += seconds;
  for (;;) {
    if (sigtimedwait(&set, nullptr, &left) > 0) return true;
    if (errno != EINTR) return false;  // EAGAIN: the time is up
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    const long long ns = (end.tv_sec - now.tv_sec) * 1000000000LL + (end.tv_nsec - now.tv_nsec);
    if (ns <= 0) return false;
    left = {static_cast<time_t>(ns / 1000000000LL), static_cast<long>(ns % 1000000000LL)};
  }
}

int Textfile(const ExporterOptions& options, const std::string& dir, uint64_t idle_after_ns,
             const sigset_t& stop) {
  const auto top = static_cast<size_t>(options.top);
  bool first = true;
  ProblemLog log;
  LiveKnown known;
  std::mutex known_mu;
  for (;;) {
    const LiveScan scan = ScanKnown(dir, options.node, top, options.timeout_ms, &known, &known_mu);
    log.Note(scan.problems);
    std::string problem;
    if (!WriteTextfile(options.textfile,
                       LiveMetrics(scan, {.top = top, .idle_after_ns = idle_after_ns}), &problem)) {
      std::fprintf(stderr, "gpuwatch exporter: %s\n", problem.c_str());
      if (first) return 2;  // a wrong directory; later, a passing problem
    }
    if (options.once) return 0;
    if (first) {
      std::fprintf(stderr,
                   "gpuwatch exporter: writing %s/gpuwatch.prom every %d s for the processes in "
                   "%s\n",
                   options.textfile.c_str(), options.interval, dir.c_str());
    }
    first = false;
    if (WaitForStop(stop, options.interval)) return 0;
  }
}

// The HTTP server on `address`: civetweb itself on an IPv4 address; on IPv6
// (`[::1]:9468`, `[::]:9468`, `:9468`), civetweb on 127.0.0.1 behind a
// relay from an IPv6 socket of ours (Debian's civetweb has no IPv6). `:PORT`
// without IPv6 on the machine is 0.0.0.0:PORT. *port: the port it listens on.
bool Serve(ListenAddress address, std::unique_ptr<prometheus::Exposer>* exposer,
           std::unique_ptr<TcpRelay>* relay, int* port, std::string* problem) {
  int fd = -1;
  if (address.family != ListenAddress::Family::kIpv4) {
    bool no_ipv6 = false;
    fd = ListenIpv6(address, problem, &no_ipv6);
    if (fd < 0 && !(no_ipv6 && address.family == ListenAddress::Family::kAny)) return false;
    if (fd < 0) address = {ListenAddress::Family::kIpv4, "0.0.0.0", address.port, "0.0.0.0"};
  }
  const std::string ports = fd < 0 ? CivetwebPorts(address) : "127.0.0.1:0";
  try {
    *exposer = std::make_unique<prometheus::Exposer>(std::vector<std::string>{
        "listening_ports", ports, "num_threads", std::to_string(kHttpThreads), "request_timeout_ms",
        std::to_string(kHttpRequestTimeoutMs)});
  } catch (const std::exception&) {
    *problem = fd < 0 ? Ipv4ListenProblem(address) : "the HTTP server did not start";
    if (fd >= 0) close(fd);
    return false;
  }
  const std::vector<int> bound = (*exposer)->GetListeningPorts();
  *port = bound.empty() ? address.port : bound.front();
  if (fd < 0) return true;
  try {
    *relay = std::make_unique<TcpRelay>(fd, *port, kHttpThreads);
  } catch (const std::exception& e) {
    *problem = e.what();  // the relay closed fd
    return false;
  }
  *port = BoundPort(fd);
  return true;
}

}  // namespace

int ExporterCommand(const ExporterOptions& options) {
  std::string dir;
  uint64_t idle_after_ns = 0;
  if (options.node) {
    // The node root is checked at each scan (ScanNode): it may be made later.
    dir = !options.dir.empty() ? options.dir : NodeRoot();
    uint64_t idle_s = 0;
    if (std::string problem; !ResolveIdleSeconds(options.idle_after_s, &idle_s, &problem)) {
      std::fprintf(stderr, "gpuwatch exporter: %s\n", problem.c_str());
      return 2;
    }
    idle_after_ns = idle_s * 1000000000ULL;
  } else if (!ResolveReaderOptions("exporter", options.dir, options.idle_after_s, &dir,
                                   &idle_after_ns)) {
    return 2;
  }
  const sigset_t stop = StopSignals();
  // An ignored signal is discarded, not waited for: a shell starts a
  // background job with SIGINT ignored.
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  if (!options.textfile.empty()) return Textfile(options, dir, idle_after_ns, stop);

  ListenAddress address;
  std::string problem;
  if (!ParseListenAddress(options.listen, &address, &problem)) {
    std::fprintf(stderr, "gpuwatch exporter: bad --listen '%s': %s\n", options.listen.c_str(),
                 problem.c_str());
    return 2;
  }
#ifdef __GLIBC__
  // One malloc arena for the HTTP server's threads, made below: a scrape runs
  // on whichever worker takes it, and with an arena each the exporter kept a
  // scrape's worth of freed memory per worker (72 MiB resident instead of 9
  // at 100 processes: docs/BENCHMARKS.md, "Issue 34: the cost of a scrape").
  mallopt(M_ARENA_MAX, 1);
#endif
  std::unique_ptr<prometheus::Exposer> exposer;
  std::unique_ptr<TcpRelay> relay;
  int port = 0;
  if (!Serve(address, &exposer, &relay, &port, &problem)) {
    std::fprintf(stderr, "gpuwatch exporter: cannot listen on '%s': %s\n", options.listen.c_str(),
                 problem.c_str());
    return 2;
  }
  const auto collectable = std::make_shared<LiveCollectable>(
      dir, options.node, static_cast<size_t>(options.top), options.timeout_ms, idle_after_ns);
  exposer->RegisterCollectable(collectable);
  std::fprintf(stderr,
               "gpuwatch exporter: serving /metrics on http://%s:%d for the processes in %s\n",
               address.shown.c_str(), port, dir.c_str());
  WaitForStop(stop, -1);
  relay.reset();
  exposer.reset();
  return 0;
}

}  // namespace gpuwatch::tools
