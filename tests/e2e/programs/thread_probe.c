// A preloaded probe for tests/e2e/reentry_test.cc, loaded after
// libgpuwatch.so:
// - rename(): with GWTEST_RENAME_LOG set, appends "NAME<TAB>THREAD" to that
//   file for every rename, NAME the new path's last component and THREAD the
//   calling thread's name: which thread wrote each report (reports are
//   written to a temporary file and renamed into place).
// - pthread_mutex_lock(): after the program called
//   gwtest_interrupt_locked(SKIP), the lock that libgpuwatch.so takes on the
//   calling thread after SKIP others raises SIGTERM while it is held.
// - clock_gettime(): after gwtest_interrupt_unlocked(), the next call from
//   libgpuwatch.so on the calling thread raises SIGTERM (gpuwatch reads the
//   clock inside its callback while it holds none of its locks).
// - rename(): after gwtest_interrupt_rename(), the next rename from
//   libgpuwatch.so on the calling thread raises SIGTERM first (a report's
//   temporary file is written and not yet renamed).
// As a signal from outside could arrive at those moments.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

static __thread int t_locked = -1;  // locks to let pass before raising; -1: off
static __thread int t_unlocked;

__attribute__((visibility("default"))) void gwtest_interrupt_locked(int skip) { t_locked = skip; }

__attribute__((visibility("default"))) void gwtest_interrupt_unlocked(void) { t_unlocked = 1; }

static __thread int t_rename;

__attribute__((visibility("default"))) void gwtest_interrupt_rename(void) { t_rename = 1; }

static int FromGpuwatch(const void* caller) {
  Dl_info info;
  return dladdr(caller, &info) != 0 && info.dli_fname != NULL &&
         strstr(info.dli_fname, "libgpuwatch") != NULL;
}

__attribute__((visibility("default"))) int pthread_mutex_lock(pthread_mutex_t* mutex) {
  static int (*real)(pthread_mutex_t*);
  if (real == NULL) real = (int (*)(pthread_mutex_t*))dlsym(RTLD_NEXT, "pthread_mutex_lock");
  const int rc = real(mutex);
  if (t_locked >= 0 && rc == 0 && FromGpuwatch(__builtin_return_address(0)) && t_locked-- == 0) {
    raise(SIGTERM);
  }
  return rc;
}

__attribute__((visibility("default"))) int clock_gettime(clockid_t clock, struct timespec* ts) {
  static int (*real)(clockid_t, struct timespec*);
  if (real == NULL) real = (int (*)(clockid_t, struct timespec*))dlsym(RTLD_NEXT, "clock_gettime");
  const int rc = real(clock, ts);
  if (t_unlocked && FromGpuwatch(__builtin_return_address(0))) {
    t_unlocked = 0;
    raise(SIGTERM);
  }
  return rc;
}

__attribute__((visibility("default"))) int rename(const char* from, const char* to) {
  static int (*real)(const char*, const char*);
  if (real == NULL) real = (int (*)(const char*, const char*))dlsym(RTLD_NEXT, "rename");
  if (t_rename && FromGpuwatch(__builtin_return_address(0))) {
    t_rename = 0;
    raise(SIGTERM);
  }
  const int rc = real(from, to);
  const char* log = getenv("GWTEST_RENAME_LOG");
  if (rc == 0 && log != NULL) {
    char thread[17] = {0};
    prctl(PR_GET_NAME, thread, 0, 0, 0);
    const char* base = strrchr(to, '/');
    char line[512];
    const int n = snprintf(line, sizeof(line), "%s\t%s\n", base != NULL ? base + 1 : to, thread);
    const int fd = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0 && n > 0) {
      (void)!write(fd, line, (size_t)n);
      close(fd);
    }
  }
  return rc;
}
