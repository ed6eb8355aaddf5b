// Peers that misbehave, for the tests of the live view and the exporter: a
// server of the test's own that answers every reader alike, and a client
// that sends its request a byte at a time.
#ifndef GPUWATCH_TESTS_E2E_PEERS_H_
#define GPUWATCH_TESTS_E2E_PEERS_H_

#include <sys/types.h>

#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <string>
#include <thread>

namespace gpuwatch::testing {

// A Unix socket bound at `path` (listening when asked), or -1.
int ListenUnix(const std::string& path, bool listening = true);

// Answers every client of the listening `fd` with `answer`, whatever it
// asks, until `stop` is readable (-1: never).
void AnswerAll(int fd, const std::string& answer, int stop);

// A child process that serves `answer` (AnswerAll) as uid and gid `uid`,
// on `live_dir`/<its pid>.sock, making `live_dir` first when asked (mode
// 0755): its pid once it listens, or -1 (reaped). For root only.
pid_t ServeAsAnotherUser(uid_t uid, const std::string& live_dir, const std::string& answer,
                         bool make_dir);

// Kills and reaps `pid`.
void Reap(pid_t pid);

// A client on the connected socket `fd` (-1: none could connect) that
// sends `text` a byte each `interval_ms`, reading whatever comes, until the
// server closes the connection or all is sent, then reads the answer to its
// end (a hang guard of 60 s); on a thread of its own. It owns `fd`.
class Trickler {
 public:
  Trickler(int fd, std::string text, int interval_ms);
  ~Trickler();
  Trickler(const Trickler&) = delete;
  Trickler& operator=(const Trickler&) = delete;

  // Until it has sent `n` bytes, or stopped.
  void WaitSent(size_t n);
  void Join();
  // After Join:
  bool connected() const { return fd_ >= 0; }
  size_t sent() const { return sent_; }
  size_t length() const { return text_.size(); }
  bool closed() const { return closed_; }  // by the server, before all was sent
  const std::string& answer() const { return answer_; }

 private:
  void Run();
  bool ReadSome();  // false at the end of the connection

  std::string text_;
  int fd_;
  int interval_ms_;
  bool closed_ = false;
  std::string answer_;
  std::mutex mu_;
  std::condition_variable cv_;
  size_t sent_ = 0;
  bool stopped_ = false;
  std::thread thread_;
};

}  // namespace gpuwatch::testing

#endif  // GPUWATCH_TESTS_E2E_PEERS_H_
