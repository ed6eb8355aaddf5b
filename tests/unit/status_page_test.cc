// The status page (libgpuwatch/base/status_page.h): what the call path and
// the background thread write is what a reader reads, names without their
// version suffix; a write cut short by a stopped writer is torn, not waited
// for; and a file that is not a page, of another version or truncated is
// refused with a sentence.
#include "libgpuwatch/base/status_page.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace gpuwatch {
namespace {

std::string TempDir() {
  char tmpl[] = "/tmp/gw_status_XXXXXX";
  return mkdtemp(tmpl);
}

const StatusThreadView* Thread(const StatusView& view, int32_t tid) {
  for (const StatusThreadView& t : view.threads) {
    if (t.tid == tid) return &t;
  }
  return nullptr;
}

// One page per test binary: the writer publishes it process-wide.
class StatusPageTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(TempDir());
    path_ = new std::string(StatusPagePath(*dir_, getpid()));
    std::string problem;
    ASSERT_TRUE(
        OpenStatusPage(*path_, {"cudaMalloc_v3020", "cudaMemcpy_v3020", "cuMemAlloc_v2"}, &problem))
        << problem;
  }
  static std::string* dir_;
  static std::string* path_;
};
std::string* StatusPageTest::dir_ = nullptr;
std::string* StatusPageTest::path_ = nullptr;

TEST_F(StatusPageTest, WhatTheCallPathWritesIsRead) {
  const auto tid = static_cast<int32_t>(syscall(SYS_gettid));
  const uint64_t calls = t_status_slot != nullptr ? t_status_slot->calls.load() : 0;
  StatusCallBegins(0, 0);
  StatusCallEnds();
  StatusCallBegins(1, 42);
  const uint64_t devices[kStatusDevices] = {0, 3 << 20};
  StatusUpdateProcess(devices, kStatusDevices, 0, "/x/report.json");
  StatusView view;
  std::string problem;
  ASSERT_TRUE(ReadStatusPage(*path_, &view, &problem)) << problem;
  EXPECT_EQ(view.pid, getpid());
  ASSERT_EQ(view.device_bytes.size(), 1u);
  EXPECT_EQ(view.device_bytes[0], (std::pair<int, uint64_t>{1, 3 << 20}));
  EXPECT_EQ(view.checkpoint_ns, 0u);
  EXPECT_EQ(view.checkpoint_path, "");  // no checkpoint: no path
  const StatusThreadView* t = Thread(view, tid);
  ASSERT_NE(t, nullptr);
  EXPECT_FALSE(t->torn);
  EXPECT_EQ(t->call, "cudaMemcpy");
  EXPECT_EQ(t->last_call, "cudaMalloc");
  EXPECT_EQ(t->calls, calls + 1);
  EXPECT_GT(t->call_start_ns, 0u);  // converted from the time-stamp counter
  EXPECT_LE(t->call_start_ns, view.now_ns);
  EXPECT_LE(t->call_start_ns, t->last_end_ns + 1000000);  // begun after the last one ended
  EXPECT_EQ(t->site, "");                                 // not resolved yet
  ASSERT_EQ(LongestCall(view), t);

  // The background thread resolves the site of the call in progress once.
  const std::vector<StatusSiteRequest> sites = StatusSitesToResolve();
  ASSERT_EQ(sites.size(), 1u);
  EXPECT_EQ(sites[0].stack_id, 42u);
  StatusWriteSite(sites[0].slot, 42, "train.py:88");
  EXPECT_TRUE(StatusSitesToResolve().empty());
  StatusUpdateProcess(devices, kStatusDevices, 123, "/x/report.json");
  ASSERT_TRUE(ReadStatusPage(*path_, &view, &problem)) << problem;
  EXPECT_EQ(Thread(view, tid)->site, "train.py:88");
  EXPECT_EQ(view.checkpoint_ns, 123u);
  EXPECT_EQ(view.checkpoint_path, "/x/report.json");

  // The call ends: no call, its site no longer shown.
  StatusCallEnds();
  ASSERT_TRUE(ReadStatusPage(*path_, &view, &problem)) << problem;
  EXPECT_EQ(Thread(view, tid)->call, "");
  EXPECT_EQ(Thread(view, tid)->site, "");
  EXPECT_EQ(Thread(view, tid)->last_call, "cudaMemcpy");
  EXPECT_EQ(Thread(view, tid)->calls, calls + 2);
  EXPECT_EQ(LongestCall(view), nullptr);
}

TEST_F(StatusPageTest, EachThreadHasItsSlotAndAThreadThatEndsFreesIt) {
  int32_t other = 0;
  std::thread([&] {
    other = static_cast<int32_t>(syscall(SYS_gettid));
    StatusCallBegins(2, 0);
    StatusView view;
    std::string problem;
    ASSERT_TRUE(ReadStatusPage(*path_, &view, &problem)) << problem;
    ASSERT_NE(Thread(view, other), nullptr);
    EXPECT_EQ(Thread(view, other)->call, "cuMemAlloc");
  }).join();
  StatusView view;
  std::string problem;
  ASSERT_TRUE(ReadStatusPage(*path_, &view, &problem)) << problem;
  EXPECT_EQ(Thread(view, other), nullptr);
}

TEST_F(StatusPageTest, AWriteCutShortIsTornNotWaitedFor) {
  StatusCallBegins(1, 0);
  StatusThread* s = t_status_slot;
  ASSERT_NE(s, nullptr);
  s->seq.store(s->seq.load() + 1);  // a writer stopped in the middle
  StatusView view;
  std::string problem;
  ASSERT_TRUE(ReadStatusPage(*path_, &view, &problem)) << problem;
  const StatusThreadView* t = Thread(view, static_cast<int32_t>(syscall(SYS_gettid)));
  ASSERT_NE(t, nullptr);
  EXPECT_TRUE(t->torn);
  EXPECT_EQ(t->call, "cudaMemcpy");  // still its best answer
  s->seq.store(s->seq.load() + 1);
  StatusCallEnds();
}

TEST_F(StatusPageTest, WhatIsNotAPageIsRefusedWithASentence) {
  const std::string path = *dir_ + "/other.status";
  StatusView view;
  std::string problem;
  EXPECT_FALSE(ReadStatusPage(path, &view, &problem));
  EXPECT_EQ(problem, "no status page at " + path);
  std::ofstream(path) << std::string(100, 'x');
  EXPECT_FALSE(ReadStatusPage(path, &view, &problem));
  EXPECT_EQ(problem, path + " is not a gpuwatch status page");
  std::ofstream(path) << "GW";
  EXPECT_FALSE(ReadStatusPage(path, &view, &problem));
  EXPECT_EQ(problem, path + " is truncated (2 bytes)");
  // Another version: its header, as a later gpuwatch would write it.
  std::vector<char> bytes(sizeof(StatusPage));
  std::FILE* in = std::fopen(path_->c_str(), "rb");
  ASSERT_NE(in, nullptr);
  ASSERT_EQ(std::fread(bytes.data(), 1, bytes.size(), in), bytes.size());
  std::fclose(in);
  const uint32_t version = 2;
  std::memcpy(bytes.data() + offsetof(StatusPage, version), &version, sizeof(version));
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(64));
  EXPECT_FALSE(ReadStatusPage(path, &view, &problem));
  EXPECT_EQ(problem, path + " is a status page of version 2; this gpuwatch reads version 1");
  // This version, cut short.
  std::memcpy(bytes.data() + offsetof(StatusPage, version), &kStatusVersion, sizeof(version));
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(4096));
  EXPECT_FALSE(ReadStatusPage(path, &view, &problem));
  EXPECT_EQ(problem, path + " is truncated (4096 bytes, a page has " +
                         std::to_string(sizeof(StatusPage)) + ")");
}

TEST(StatusDuration, ReadsAsPeopleSayIt) {
  EXPECT_EQ(StatusDuration(4200000000ULL), "4.2s");
  EXPECT_EQ(StatusDuration(723000000000ULL), "12m 3s");
  EXPECT_EQ(StatusDuration(3720000000000ULL), "1h 2m");
}

}  // namespace
}  // namespace gpuwatch
