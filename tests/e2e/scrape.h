// The harness of the tests that scrape `gpuwatch exporter` (exporter_test.cc,
// node_test.cc): the exporter started on a free port, a Prometheus server of
// the test's own scraping it, and HTTP on loopback.
#ifndef GPUWATCH_TESTS_E2E_SCRAPE_H_
#define GPUWATCH_TESTS_E2E_SCRAPE_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cctype>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/e2e/common.h"

namespace gpuwatch::testing {

using json = nlohmann::json;

inline const std::string kPrometheus = "/usr/bin/prometheus";
inline const std::string kPromtool = "/usr/bin/promtool";

inline bool Installed(const std::string& path) { return access(path.c_str(), X_OK) == 0; }

#define SKIP_WITHOUT(tool) \
  if (!Installed(tool)) GTEST_SKIP() << (tool) << " is not installed (scripts/install-deps.sh)"

// A loopback port nobody listens on now (bound to port 0, then let go).
inline int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  close(fd);
  return port;
}

// Calls `done` until it is true or `timeout_ms` passed, `poll_ms` apart.
inline bool PollUntil(const std::function<bool()>& done, int timeout_ms, int poll_ms = 200) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    if (done()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(poll_ms));
  }
}

struct HttpResponse {
  int status = 0;  // 0: no answer
  std::string body;
};

// A client on 127.0.0.1:PORT (or [::1]:PORT), or -1.
inline int ConnectTcp(int port, bool ipv6 = false) {
  const int fd = socket(ipv6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sockaddr_in6 a6{};
  a6.sin6_family = AF_INET6;
  a6.sin6_port = htons(static_cast<uint16_t>(port));
  a6.sin6_addr = in6addr_loopback;
  const int rc = ipv6 ? connect(fd, reinterpret_cast<sockaddr*>(&a6), sizeof(a6))
                      : connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  if (rc != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// GET http://127.0.0.1:PORT/TARGET (or [::1]) over HTTP/1.0 (the server
// closes the connection after its answer), waiting `timeout_ms` at most: a
// hang guard, by default 30 s, which a busy machine does not come near.
inline HttpResponse HttpGet(int port, const std::string& target, int timeout_ms = 30000,
                            bool ipv6 = false) {
  HttpResponse r;
  const int fd = ConnectTcp(port, ipv6);
  if (fd < 0) return r;
  const std::string request = "GET " + target + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    close(fd);
    return r;
  }
  std::string answer;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || poll(&p, 1, static_cast<int>(left)) <= 0) break;
    char buf[65536];
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) {
      if (n == 0) {
        const size_t header_end = answer.find("\r\n\r\n");
        if (answer.rfind("HTTP/1.", 0) == 0 && header_end != std::string::npos) {
          r.status = std::atoi(answer.c_str() + answer.find(' ') + 1);
          r.body = answer.substr(header_end + 4);
        }
      }
      break;
    }
    answer.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return r;
}

inline std::string UrlEncode(const std::string& s) {
  std::string out;
  for (const unsigned char c : s) {
    if (std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      char hex[4];
      std::snprintf(hex, sizeof(hex), "%%%02X", c);
      out += hex;
    }
  }
  return out;
}

inline void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

// `gpuwatch exporter --listen 127.0.0.1:0 --dir LIVE` (or another --listen
// whose host prints as `shown`), on the port it says in its first line;
// stopped with SIGTERM.
class Exporter {
 public:
  explicit Exporter(const std::string& live_dir, const std::vector<std::string>& args = {},
                    const std::string& listen = "127.0.0.1:0",
                    const std::string& shown = "127.0.0.1") {
    std::vector<std::string> argv = {kCli, "exporter", "--listen", listen, "--dir", live_dir};
    argv.insert(argv.end(), args.begin(), args.end());
    child_ = StartProcess(argv, {}, "");
    const std::string prefix = "gpuwatch exporter: serving /metrics on http://" + shown + ":";
    PollUntil(
        [&] {
          ReadAvailable(child_, 100);
          return child_.err_text.find('\n') != std::string::npos || child_.err < 0;
        },
        30000, 0);
    first_line_ = child_.err_text.substr(0, child_.err_text.find('\n'));
    if (first_line_.rfind(prefix, 0) == 0) port_ = std::atoi(first_line_.c_str() + prefix.size());
  }
  ~Exporter() {
    if (child_.pid > 0) Stop();
  }
  Exporter(const Exporter&) = delete;
  Exporter& operator=(const Exporter&) = delete;

  int port() const { return port_; }
  const std::string& first_line() const { return first_line_; }
  ProcessResult Stop() {
    kill(child_.pid, SIGTERM);
    ProcessResult r = FinishProcess(child_, 30000);
    child_.pid = -1;
    return r;
  }

 private:
  RunningProcess child_;
  std::string first_line_;
  int port_ = 0;
};

// A Prometheus server of its own (storage in `dir`) that scrapes the
// exporter on `target_port` every second and loads the example rules (or
// `rules`).
class Prometheus {
 public:
  Prometheus(const ScopedTempDir& dir, int target_port,
             const std::string& rules = kSourceDir + "/examples/prometheus/gpuwatch-rules.yml",
             const std::vector<int>& more_targets = {},
             const std::string& target_host = "127.0.0.1") {
    std::string targets = "'" + target_host + ":" + std::to_string(target_port) + "'";
    for (const int port : more_targets) targets += ", '127.0.0.1:" + std::to_string(port) + "'";
    const std::string config = dir.path() + "/prometheus.yml";
    WriteFile(config,
              "global:\n"
              "  scrape_interval: 1s\n"
              "  scrape_timeout: 1s\n"
              "  evaluation_interval: 1s\n"
              "rule_files:\n"
              "  - " +
                  rules +
                  "\n"
                  "scrape_configs:\n"
                  "  - job_name: gpuwatch\n"
                  "    static_configs:\n"
                  "      - targets: [" +
                  targets + "]\n");
    // The port is free when chosen; another process may take it before
    // Prometheus does: then it exits, and another port is tried.
    for (int attempt = 0; attempt < 3 && port_ == 0; ++attempt) {
      const int port = FreePort();
      child_ = StartProcess(
          {kPrometheus, "--config.file=" + config, "--storage.tsdb.path=" + dir.path() + "/tsdb",
           "--web.listen-address=127.0.0.1:" + std::to_string(port), "--log.level=warn"},
          {}, dir.path());
      bool exited = false;
      const bool ready = PollUntil(
          [&] {
            if (!ReadAvailable(child_, 0)) {
              exited = true;
              return true;
            }
            return HttpGet(port, "/-/ready", 2000).status == 200;
          },
          90000);
      if (ready && !exited) {
        port_ = port;
      } else {
        log_ += FinishProcess(child_, 10000).err;
        child_.pid = -1;
      }
    }
  }
  ~Prometheus() {
    if (child_.pid > 0) {
      kill(child_.pid, SIGTERM);
      FinishProcess(child_, 30000);
    }
  }
  Prometheus(const Prometheus&) = delete;
  Prometheus& operator=(const Prometheus&) = delete;

  bool ready() const { return port_ != 0; }
  std::string log() {
    if (child_.pid > 0) ReadAvailable(child_, 0);
    return log_ + child_.err_text;
  }

  // The result of an instant query: an array of {"metric", "value"}, or
  // null when the query failed.
  json Query(const std::string& promql) {
    ReadAvailable(child_, 0);  // its log, so that it never blocks on a full pipe
    const HttpResponse r = HttpGet(port_, "/api/v1/query?query=" + UrlEncode(promql));
    const json doc = json::parse(r.body, nullptr, false);
    if (r.status != 200 || !doc.is_object() || doc.value("status", "") != "success") return nullptr;
    return doc["data"]["result"];
  }

  json Get(const std::string& target) {
    const HttpResponse r = HttpGet(port_, target);
    return json::parse(r.body, nullptr, false);
  }

 private:
  RunningProcess child_;
  int port_ = 0;
  std::string log_;
};

// The value of a query's only series, or -1.
inline double OnlyValue(const json& result) {
  if (!result.is_array() || result.size() != 1) return -1;
  return std::stod(result[0]["value"][1].get<std::string>());
}

}  // namespace gpuwatch::testing

#endif  // GPUWATCH_TESTS_E2E_SCRAPE_H_
