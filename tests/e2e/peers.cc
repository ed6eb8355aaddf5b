#include "tests/e2e/peers.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <utility>

#include "libgpuwatch/base/live_dir.h"

namespace gpuwatch::testing {

int ListenUnix(const std::string& path, bool listening) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) return -1;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  if (bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0 ||
      (listening && listen(fd, 64) != 0)) {
    close(fd);
    return -1;
  }
  return fd;
}

void AnswerAll(int fd, const std::string& answer, int stop) {
  for (;;) {
    pollfd fds[2] = {{fd, POLLIN, 0}, {stop, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) continue;
    if (fds[1].revents != 0) return;
    const int c = accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) continue;
    for (size_t sent = 0; sent < answer.size();) {
      const ssize_t n = send(c, answer.data() + sent, answer.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) break;  // the client had enough
      sent += static_cast<size_t>(n);
    }
    close(c);
  }
}

pid_t ServeAsAnotherUser(uid_t uid, const std::string& live_dir, const std::string& answer,
                         bool make_dir) {
  int ready[2];
  if (pipe(ready) != 0) return -1;
  const pid_t child = fork();
  if (child == 0) {
    if (setgid(uid) != 0 || setuid(uid) != 0 || (make_dir && mkdir(live_dir.c_str(), 0755) != 0)) {
      _exit(3);
    }
    const int fd = ListenUnix(LiveSocketPath(live_dir, getpid()));
    (void)!write(ready[1], fd >= 0 ? "y" : "n", 1);
    if (fd >= 0) AnswerAll(fd, answer, -1);
    _exit(0);
  }
  close(ready[1]);
  char c = 0;
  const bool listening = child > 0 && read(ready[0], &c, 1) == 1 && c == 'y';
  close(ready[0]);
  if (!listening && child > 0) Reap(child);
  return listening ? child : -1;
}

void Reap(pid_t pid) {
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

Trickler::Trickler(int fd, std::string text, int interval_ms)
    : text_(std::move(text)), fd_(fd), interval_ms_(interval_ms) {
  thread_ = std::thread([this] { Run(); });
}

Trickler::~Trickler() {
  if (thread_.joinable()) thread_.join();
  if (fd_ >= 0) close(fd_);
}

void Trickler::WaitSent(size_t n) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return sent_ >= n || stopped_; });
}

void Trickler::Join() { thread_.join(); }

void Trickler::Run() {
  for (size_t i = 0; fd_ >= 0 && i < text_.size() && !closed_; ++i) {
    if (send(fd_, &text_[i], 1, MSG_NOSIGNAL) != 1) {
      closed_ = true;
      break;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++sent_;
    }
    cv_.notify_all();
    // The pace of the client is what the tests are about, not a wait for
    // something else.
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, interval_ms_) > 0) closed_ = !ReadSome();
  }
  pollfd p{fd_, POLLIN, 0};
  while (fd_ >= 0 && !closed_ && poll(&p, 1, 60000) > 0 && ReadSome()) {
  }
  std::lock_guard<std::mutex> lock(mu_);
  stopped_ = true;
  cv_.notify_all();
}

bool Trickler::ReadSome() {
  char buf[65536];
  const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
  if (n > 0) answer_.append(buf, static_cast<size_t>(n));
  return n > 0;
}

}  // namespace gpuwatch::testing
