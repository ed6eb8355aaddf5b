// The status page's reader side (status_page.h): `gpuwatch why`, `top` and
// the exporter read another process's page with this.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "libgpuwatch/base/clock.h"
#include "libgpuwatch/base/status_page.h"

namespace gpuwatch {
namespace {

// Tries per part while its counter is odd or moved: a writer's stores take
// nanoseconds, so a counter odd this long belongs to a writer that stopped.
constexpr int kTries = 20000;

// Copies a part under its counter: `copy` runs until it ran between two
// equal even reads of `seq`. False when it never did (torn).
template <typename Copy>
bool ReadUnder(const std::atomic<uint32_t>& seq, Copy&& copy) {
  for (int i = 0; i < kTries; ++i) {
    const uint32_t before = seq.load(std::memory_order_acquire);
    if ((before & 1) != 0) continue;
    copy();
    std::atomic_thread_fence(std::memory_order_acquire);
    if (seq.load(std::memory_order_relaxed) == before) return true;
  }
  return false;
}

std::string NameOf(const StatusPage& page, uint32_t index_plus_one) {
  if (index_plus_one == 0) return "";
  const uint32_t i = index_plus_one - 1;
  if (i >= page.call_names || i >= kStatusCallNames) return "call #" + std::to_string(i);
  return std::string(page.names[i], strnlen(page.names[i], kStatusNameBytes));
}

// Ticks() to CLOCK_MONOTONIC ns, between the page's two (ticks, ns)
// pairs: its start and gpuwatch's thread's last write. 0 when unknown.
struct TickClock {
  bool ns = false;
  double base_ticks = 0, base_ns = 0, ns_per_tick = 0;
  uint64_t ToNs(uint64_t ticks) const {
    if (ticks == 0) return 0;
    if (ns) return ticks;
    if (ns_per_tick <= 0) return 0;
    const double v = base_ns + (static_cast<double>(ticks) - base_ticks) * ns_per_tick;
    return v > 0 ? static_cast<uint64_t>(v) : 0;
  }
};

TickClock ClockOf(const StatusPage& page, uint64_t updated_ticks, uint64_t updated_ns) {
  TickClock c;
  c.ns = page.ticks_are_ns != 0;
  if (!c.ns && updated_ticks > page.started_ticks && updated_ns > page.started_ns) {
    c.base_ticks = static_cast<double>(updated_ticks);
    c.base_ns = static_cast<double>(updated_ns);
    c.ns_per_tick = static_cast<double>(updated_ns - page.started_ns) /
                    static_cast<double>(updated_ticks - page.started_ticks);
  }
  return c;
}

void ReadThreads(const StatusPage& page, const TickClock& clock, StatusView* out) {
  for (const StatusThread& s : page.threads) {
    StatusThreadView t;
    t.tid = s.tid.load(std::memory_order_acquire);
    if (t.tid == 0) continue;
    uint32_t call = 0;
    uint32_t last = 0;
    uint32_t stack = 0;
    t.torn = !ReadUnder(s.seq, [&] {
      call = s.call.load(std::memory_order_relaxed);
      stack = s.stack_id.load(std::memory_order_relaxed);
      t.call_start_ns = clock.ToNs(s.call_start.load(std::memory_order_relaxed));
      last = s.last_call.load(std::memory_order_relaxed);
      t.last_end_ns = clock.ToNs(s.last_end.load(std::memory_order_relaxed));
      t.calls = s.calls.load(std::memory_order_relaxed);
    });
    if (t.torn) {
      // A stopped writer: what the fields hold is at worst half a call's
      // change; the call's name is still the thread's best answer.
      call = s.call.load(std::memory_order_relaxed);
      stack = s.stack_id.load(std::memory_order_relaxed);
    }
    t.call = NameOf(page, call);
    t.last_call = NameOf(page, last);
    uint32_t site_stack = 0;
    std::string site;
    ReadUnder(s.site_seq, [&] {
      site_stack = s.site_stack_id.load(std::memory_order_relaxed);
      site = s.site.Load();
    });
    if (call != 0 && stack != 0 && site_stack == stack) t.site = site;
    out->threads.push_back(std::move(t));
  }
}

}  // namespace

bool ReadStatusPage(const std::string& path, StatusView* out, std::string* problem) {
  *out = StatusView();
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    *problem = errno == ENOENT ? "no status page at " + path
                               : "cannot open " + path + ": " + std::strerror(errno);
    return false;
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    *problem = path + " is not a status page (not a regular file)";
    close(fd);
    return false;
  }
  constexpr size_t kHeader = offsetof(StatusPage, process);
  const auto size = static_cast<size_t>(st.st_size);
  if (size < kHeader) {
    *problem = path + " is truncated (" + std::to_string(size) + " bytes)";
    close(fd);
    return false;
  }
  void* map = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (map == MAP_FAILED) {
    *problem = "cannot map " + path + ": " + std::strerror(errno);
    return false;
  }
  const auto& page = *static_cast<const StatusPage*>(map);
  bool ok = false;
  if (page.magic != kStatusMagic) {
    *problem = path + " is not a gpuwatch status page";
  } else if (page.version != kStatusVersion) {
    *problem = path + " is a status page of version " + std::to_string(page.version) +
               "; this gpuwatch reads version " + std::to_string(kStatusVersion);
  } else if (page.size != sizeof(StatusPage) || size < sizeof(StatusPage)) {
    *problem = path + " is truncated (" + std::to_string(size) + " bytes, a page has " +
               std::to_string(sizeof(StatusPage)) + ")";
  } else {
    ok = true;
    out->pid = page.pid;
    out->parent_pid = page.parent_pid;
    out->started_ns = page.started_ns;
    const StatusProcess& p = page.process;
    uint64_t devices[kStatusDevices] = {};
    uint64_t updated_ticks = 0;
    out->process_torn = !ReadUnder(p.seq, [&] {
      out->threads_without_slot = p.threads_without_slot.load(std::memory_order_relaxed);
      out->updated_ns = p.updated_ns.load(std::memory_order_relaxed);
      updated_ticks = p.updated_ticks.load(std::memory_order_relaxed);
      for (int d = 0; d < kStatusDevices; ++d) {
        devices[d] = p.device_bytes[d].load(std::memory_order_relaxed);
      }
      out->checkpoint_ns = p.checkpoint_ns.load(std::memory_order_relaxed);
      out->checkpoint_path = p.checkpoint_path.Load();
    });
    for (int d = 0; d < kStatusDevices; ++d) {
      if (devices[d] != 0) out->device_bytes.emplace_back(d, devices[d]);
    }
    ReadThreads(page, ClockOf(page, updated_ticks, out->updated_ns), out);
    out->now_ns = MonotonicNs();
  }
  munmap(map, size);
  return ok;
}

const StatusThreadView* LongestCall(const StatusView& view) {
  const StatusThreadView* longest = nullptr;
  for (const StatusThreadView& t : view.threads) {
    if (t.call.empty()) continue;
    // A start not known yet (0) counts as the latest.
    const uint64_t start = t.call_start_ns != 0 ? t.call_start_ns : UINT64_MAX;
    if (longest == nullptr ||
        start < (longest->call_start_ns != 0 ? longest->call_start_ns : UINT64_MAX)) {
      longest = &t;
    }
  }
  return longest;
}

std::string StatusDuration(uint64_t ns) {
  const uint64_t s = ns / 1000000000ULL;
  char buf[48];
  if (s < 60) {
    std::snprintf(buf, sizeof(buf), "%.1fs", static_cast<double>(ns) / 1e9);
  } else if (s < 3600) {
    std::snprintf(buf, sizeof(buf), "%llum %llus", static_cast<unsigned long long>(s / 60),
                  static_cast<unsigned long long>(s % 60));
  } else {
    std::snprintf(buf, sizeof(buf), "%lluh %llum", static_cast<unsigned long long>(s / 3600),
                  static_cast<unsigned long long>(s / 60 % 60));
  }
  return buf;
}

}  // namespace gpuwatch
