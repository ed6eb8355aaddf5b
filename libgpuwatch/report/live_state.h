// The live state of a running process, as `gpuwatch top` and `gpuwatch
// exporter` read it from its socket (interpose/agent/live.cc; docs/live.md has the
// format): device memory live and peak per device and kind, the sites that
// hold the most with their growth per minute and per mark and their recent
// history, the allocation, free and OOM counters, transfers per direction
// and host kind, kernel launches, who the process is (and its parent at
// attach), when it last did something on CUDA, and PyTorch's reserved and
// allocated bytes as last handed over (--torch-blocks).
//
// Built on gpuwatch's background thread when a reader connects, from
// counters that take no lock (Tracker::Totals, the per-site live bytes) and
// the history the thread keeps (LiveHistory): never from the live table.
#ifndef GPUWATCH_LIBGPUWATCH_REPORT_LIVE_STATE_H_
#define GPUWATCH_LIBGPUWATCH_REPORT_LIVE_STATE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "libgpuwatch/analysis/growth.h"
#include "libgpuwatch/analysis/site_resolver.h"
#include "libgpuwatch/base/cgroup.h"
#include "libgpuwatch/base/device_identity.h"
#include "libgpuwatch/record/tracker.h"
#include "libgpuwatch/record/transfers.h"

namespace gpuwatch {

struct ReportTorchBlocks;

inline constexpr char kLiveSchema[] = "gpuwatch-live";
inline constexpr int kLiveVersion = 1;
// Sites listed when a reader asks for none, and at most.
inline constexpr size_t kLiveDefaultTop = 50;
inline constexpr size_t kLiveMaxTop = 1000;

// One sample a second of what the live state shows over time: the last
// minute (kSamples), each with the sites that held the most (kSitesPerSample).
class LiveHistory {
 public:
  static constexpr size_t kSamples = 61;
  static constexpr size_t kSitesPerSample = 256;
  struct Sample {
    uint64_t time_ns = 0;  // the tracker's clock
    uint64_t device_bytes = 0;
    uint64_t h2d_bytes = 0;  // copies so far, all host kinds
    uint64_t d2h_bytes = 0;
    std::vector<std::pair<uint32_t, uint64_t>> sites;  // sorted by id
  };
  // `*sites` as from Tracker::LiveDeviceBytesBySite: a scan the caller
  // reuses, reordered here.
  void Add(uint64_t time_ns, uint64_t device_bytes, uint64_t h2d_bytes, uint64_t d2h_bytes,
           std::vector<std::pair<uint32_t, uint64_t>>* sites);
  const std::deque<Sample>& samples() const { return samples_; }

 private:
  std::deque<Sample> samples_;
};

// When this process last did something on CUDA, as the background thread
// sees it once a second from the counters it samples anyway (allocations,
// frees, copies, kernel launches): nothing on the call path. A change of any
// of them since the last tick is activity at that tick, so the time is
// within a tick of the call.
class LiveActivity {
 public:
  // From `now` (attach, or a fork): no activity seen yet.
  void Reset(uint64_t now_ns, uint64_t now_unix_ms);
  // Once a tick, with Tracker::Totals.
  void Tick(const TrackerSnapshot& totals, uint64_t now_ns, uint64_t now_unix_ms);
  uint64_t last_unix_ms() const { return last_unix_ms_; }
  uint64_t IdleNs(uint64_t now_ns) const { return now_ns > last_ns_ ? now_ns - last_ns_ : 0; }

 private:
  uint64_t seen_ = 0;  // the sum of the counters at the last tick
  uint64_t last_ns_ = 0;
  uint64_t last_unix_ms_ = 0;
};

struct LiveInputs {
  long pid = 0;
  std::string host;
  std::string rank;
  std::vector<std::string> command;
  uint64_t started_unix_ms = 0;
  uint64_t now_unix_ms = 0;
  uint64_t ooms = 0;
  const TrackerSnapshot* totals = nullptr;           // Tracker::Totals
  const TransfersSnapshot* transfers = nullptr;      // null: no transfers
  std::vector<std::pair<uint32_t, uint64_t>> sites;  // live device bytes by site now
  std::vector<GrowthSample> last_marks;              // the newest two marks at most, oldest first
  const LiveHistory* history = nullptr;
  size_t top = kLiveDefaultTop;  // sites listed; the rest in "other_sites"
  // Each device's memory (cuDeviceTotalMem); 0 = unknown.
  std::array<uint64_t, kMaxTrackedDevices> device_total_bytes{};
  // Which physical GPU each device is (UUID, PCI bus id, NVML's index);
  // null: all unknown.
  const std::array<DeviceIdentity, kMaxTrackedDevices>* device_identity = nullptr;
  // The container, unit and pod the process runs in (read at attach).
  CgroupLabels cgroup;
  // PyTorch's blocks as last handed over (gpuwatch_torch_blocks()); null:
  // no "torch" member.
  const ReportTorchBlocks* torch_blocks = nullptr;
  // The parent at attach (or at the fork that made this process), with its
  // start time (/proc, clock ticks since boot): a reader compares it with the
  // parent now to tell an orphan. parent_pid 0: unknown ("parent" is null).
  long parent_pid = 0;
  uint64_t parent_start_ticks = 0;
  // The last CUDA activity the background thread saw, and the time of this
  // answer on its clock (MonotonicNs); null: "activity" says 0 and 0.
  const LiveActivity* activity = nullptr;
  uint64_t now_ns = 0;
};

// The live state as JSON text (one line, ends with a newline).
std::string BuildLiveState(const LiveInputs& in, SiteResolver* sites);

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_REPORT_LIVE_STATE_H_
