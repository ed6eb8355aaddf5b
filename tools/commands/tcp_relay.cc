#include "tools/commands/tcp_relay.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>

namespace gpuwatch::tools {

// Shared by the acceptor and each connection's thread: it lives until the
// last of them ends.
struct TcpRelay::State {
  int listen_fd = -1;
  int stop_fd = -1;  // an eventfd, readable once the relay stops
  int target_port = 0;
  int max_connections = 0;
  std::mutex mu;
  std::condition_variable changed;
  int active = 0;
  bool stopping = false;
  ~State() {
    if (listen_fd >= 0) close(listen_fd);
    if (stop_fd >= 0) close(stop_fd);
  }
};

namespace {

// A client that reads nothing holds its thread this long at most.
constexpr int kSendTimeoutS = 30;

int ConnectLoopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Writes all of [data, data + n) to fd; false when it cannot.
bool SendAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    const ssize_t sent = send(fd, data, n, MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) continue;
    if (sent <= 0) return false;
    data += sent;
    n -= static_cast<size_t>(sent);
  }
  return true;
}

// Copies each side's bytes to the other until the server closes (or either
// side fails, or the relay stops). The client's end of its request is passed
// on as a half close.
void Relay(int client, int server, int stop_fd) {
  bool client_open = true;
  char buf[16384];
  for (;;) {
    pollfd p[3] = {{server, POLLIN, 0}, {stop_fd, POLLIN, 0}, {client, POLLIN, 0}};
    if (poll(p, client_open ? 3 : 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (p[1].revents != 0) return;
    if (p[0].revents != 0) {
      const ssize_t n = recv(server, buf, sizeof(buf), 0);
      if (n <= 0 || !SendAll(client, buf, static_cast<size_t>(n))) return;
    }
    if (client_open && p[2].revents != 0) {
      const ssize_t n = recv(client, buf, sizeof(buf), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        client_open = false;
        shutdown(server, SHUT_WR);
      } else if (!SendAll(server, buf, static_cast<size_t>(n))) {
        return;
      }
    }
  }
}

void Connection(const std::shared_ptr<TcpRelay::State>& state, int client) {
  const timeval send_timeout{kSendTimeoutS, 0};
  setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof(send_timeout));
  const int server = ConnectLoopback(state->target_port);
  if (server >= 0) {
    Relay(client, server, state->stop_fd);
    close(server);
  }
  close(client);
  const std::lock_guard<std::mutex> lock(state->mu);
  --state->active;
  state->changed.notify_all();
}

void Accept(const std::shared_ptr<TcpRelay::State>& state) {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(state->mu);
      state->changed.wait(
          lock, [&] { return state->stopping || state->active < state->max_connections; });
      if (state->stopping) return;
    }
    pollfd p[2] = {{state->listen_fd, POLLIN, 0}, {state->stop_fd, POLLIN, 0}};
    if (poll(p, 2, -1) < 0) continue;  // EINTR
    if (p[1].revents != 0) return;
    const int client = accept4(state->listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) {
      // EMFILE and the like: the listening socket stays readable; wait a
      // moment rather than spin.
      if (errno != EINTR && errno != ECONNABORTED && errno != EAGAIN) {
        pollfd stop{state->stop_fd, POLLIN, 0};
        poll(&stop, 1, 100);
      }
      continue;
    }
    {
      const std::lock_guard<std::mutex> lock(state->mu);
      ++state->active;
    }
    try {
      std::thread(Connection, state, client).detach();
    } catch (const std::system_error&) {
      close(client);
      const std::lock_guard<std::mutex> lock(state->mu);
      --state->active;
    }
  }
}

}  // namespace

TcpRelay::TcpRelay(int listen_fd, int target_port, int max_connections)
    : state_(std::make_shared<State>()) {
  state_->listen_fd = listen_fd;
  state_->stop_fd = eventfd(0, EFD_CLOEXEC);
  if (state_->stop_fd < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
  state_->target_port = target_port;
  state_->max_connections = max_connections;
  acceptor_ = std::thread(Accept, state_);
}

TcpRelay::~TcpRelay() {
  {
    const std::lock_guard<std::mutex> lock(state_->mu);
    state_->stopping = true;
    state_->changed.notify_all();
  }
  const uint64_t one = 1;
  if (write(state_->stop_fd, &one, sizeof(one)) < 0) {
    // an eventfd's counter does not overflow at 1
  }
  if (acceptor_.joinable()) acceptor_.join();
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->changed.wait(lock, [&] { return state_->active == 0; });
}

}  // namespace gpuwatch::tools
