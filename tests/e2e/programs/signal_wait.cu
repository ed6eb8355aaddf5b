// A program that ends by a signal, for the tests of reports on SIGTERM,
// SIGINT, SIGHUP, crashes and SIGKILL (tests/e2e/signals_test.cc). Every mode
// first leaks kLeakBytes at the line marked LEAK:signal, except where said.
//
//   wait        prints "ready", then waits for a signal (pause) forever
//   stdin       prints "ready", reads a line from stdin, exits 0
//   own         installs its own SIGTERM handler (prints, exits 7) after its
//               first CUDA call, prints "ready", waits
//   chain       installs a SIGTERM handler (SA_SIGINFO | SA_RESETHAND) before
//               its first CUDA call; the handler prints and returns; then the
//               program prints what SIGTERM's disposition is now and exits 7
//   segv        writes through a null pointer
//   bus         reads a mapped page past the end of its (empty) file
//   fpe         divides an integer by zero
//   ill         executes an undefined instruction (ud2)
//   abort       calls abort()
//   busy        4 threads allocate and free in a loop until a line arrives
//               on stdin; prints the number of pairs, then exits 0
#include <cuda_runtime.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr size_t kLeakBytes = (5u << 20) + 4096;

std::atomic<bool> g_chain_ran{false};

void Say(const char* text) { (void)!write(STDOUT_FILENO, text, std::strlen(text)); }

void Leak() {
  void* p = nullptr;
  if (cudaMalloc(&p, kLeakBytes) != cudaSuccess) std::exit(10);  // LEAK:signal
}

void OwnHandler(int sig) {
  Say(sig == SIGTERM ? "own handler: SIGTERM\n" : "own handler: other\n");
  std::exit(7);
}

void ChainHandler(int sig, siginfo_t* info, void*) {
  Say(sig == SIGTERM && info != nullptr && info->si_code == SI_USER
          ? "chained handler: SIGTERM from kill\n"
          : "chained handler: unexpected arguments\n");
  g_chain_ran.store(true);
}

void WaitForever() {
  for (;;) pause();
}

void ReadLine() {
  char c = 0;
  while (read(STDIN_FILENO, &c, 1) == 1 && c != '\n') {
  }
}

int Busy() {
  std::atomic<bool> stop{false};
  std::atomic<long> pairs{0};
  std::atomic<int> running{0};  // threads that finished a first pair
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      long n = 0;
      while (!stop.load()) {
        void* p = nullptr;
        if (cudaMalloc(&p, 512) != cudaSuccess || cudaFree(p) != cudaSuccess) std::abort();
        if (++n == 1) running.fetch_add(1);
      }
      pairs.fetch_add(n);
    });
  }
  // "ready" once every thread is in its loop, so that the signals the test
  // sends next arrive while all four allocate.
  while (running.load() < 4) std::this_thread::yield();
  Say("ready\n");
  ReadLine();
  stop.store(true);
  for (auto& t : threads) t.join();
  std::printf("pairs %ld\n", pairs.load());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "chain") {
    struct sigaction action {};
    action.sa_sigaction = ChainHandler;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_SIGINFO | SA_RESETHAND;
    sigaction(SIGTERM, &action, nullptr);
  }
  Leak();
  if (mode == "wait") {
    Say("ready\n");
    WaitForever();
  }
  if (mode == "stdin") {
    Say("ready\n");
    ReadLine();
    Say("still running\n");
    return 0;
  }
  if (mode == "own") {
    signal(SIGTERM, OwnHandler);
    Say("ready\n");
    WaitForever();
  }
  if (mode == "chain") {
    // SIGTERM stays blocked but in sigsuspend, so that it cannot slip in
    // between the test of the flag and the wait.
    sigset_t term;
    sigset_t others;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &term, &others);
    Say("ready\n");
    while (!g_chain_ran.load()) sigsuspend(&others);
    struct sigaction now {};
    sigaction(SIGTERM, nullptr, &now);
    Say(now.sa_handler == SIG_DFL ? "SIGTERM is SIG_DFL again\n" : "SIGTERM still handled\n");
    std::exit(7);
  }
  if (mode == "segv") {
    *static_cast<volatile int*>(nullptr) = 1;
    return 20;
  }
  if (mode == "bus") {
    const int fd = memfd_create("signal_wait", 0);  // 0 bytes long
    void* page = fd < 0 ? MAP_FAILED : mmap(nullptr, 4096, PROT_READ, MAP_SHARED, fd, 0);
    if (page == MAP_FAILED) return 21;
    return *static_cast<volatile int*>(page);
  }
  if (mode == "fpe") {
    volatile int zero = 0;
    return 10 / zero;
  }
  if (mode == "ill") __builtin_trap();
  if (mode == "abort") std::abort();
  if (mode == "busy") return Busy();
  std::fprintf(stderr, "usage: signal_wait wait|stdin|own|chain|segv|bus|fpe|ill|abort|busy\n");
  return 2;
}
