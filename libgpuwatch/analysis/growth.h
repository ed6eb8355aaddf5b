// Growth detection: device bytes live per allocation site, sampled over the
// run into a bounded timeline, and the sites whose bytes keep rising.
//
// Leaks in training loops rarely show as "live at exit": they show as memory
// that grows every iteration, and is often freed at the end. So the timeline
// is sampled while the program runs: at each gpuwatch_mark() (an iteration
// or phase boundary) and periodically (GPUWATCH_SAMPLE_MS), into two series.
// Growth suspects come from the marks when the program made any, otherwise
// from the periodic samples, and are judged on the samples alone, whatever
// is live at exit.
//
// Bounds. Each series keeps at most `capacity` samples spread evenly over the
// run (when full, every other one is dropped and from then on only every
// second new one is kept, and so on) plus the newest. Each sample keeps at
// most `max_sites` sites, the largest, in a list of their size. So the memory
// is capped at about 2 * (capacity + 1) * max_sites * 16 bytes (8.4 MB with
// the defaults) however long the program runs and however many sites it has.
//
// Nothing here runs in a CUDA callback: samples are taken by gpuwatch_mark()
// on the caller's thread and by gpuwatch's background thread.
#ifndef GPUWATCH_LIBGPUWATCH_ANALYSIS_GROWTH_H_
#define GPUWATCH_LIBGPUWATCH_ANALYSIS_GROWTH_H_

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "libgpuwatch/base/mutex.h"

namespace gpuwatch {

struct GrowthSample {
  uint64_t time_ns = 0;  // on the tracker's clock (since attach)
  uint64_t mark = 0;     // 1-based ordinal of the mark; 0 for a periodic sample
  std::string label;     // gpuwatch_mark's label; empty for periodic samples
  uint64_t device_bytes = 0;
  // Device bytes live per site (stack id) with any, sorted by id.
  std::vector<std::pair<uint32_t, uint64_t>> sites;
};

// A bounded, evenly thinned series of samples (see the file comment). Not
// thread-safe; Timeline locks around it.
class SampleSeries {
 public:
  explicit SampleSeries(size_t capacity);
  void Add(GrowthSample sample);
  // The kept samples and the newest, oldest first.
  std::vector<GrowthSample> Samples() const;
  // The last `n` of Samples() at most, oldest first, without copying the rest.
  std::vector<GrowthSample> Last(size_t n) const;
  // Samples ever added.
  uint64_t total() const { return total_; }
  // Bytes the kept samples' site lists hold (their capacity).
  size_t SiteBytesHeld() const;

 private:
  size_t capacity_;
  uint64_t stride_ = 1;  // keep sample i when i % stride_ == 0
  uint64_t total_ = 0;
  std::vector<std::pair<uint64_t, GrowthSample>> kept_;  // (index, sample)
  std::optional<GrowthSample> newest_;                   // when not in kept_
};

struct TimelineSnapshot {
  std::vector<GrowthSample> marks;
  std::vector<GrowthSample> periodic;
  uint64_t marks_total = 0;
  uint64_t periodic_total = 0;
  size_t capacity = 0;
  uint64_t interval_ms = 0;  // periodic sampling interval; 0 = off
};

// The two series behind one mutex. Thread-safe.
class Timeline {
 public:
  static constexpr size_t kDefaultCapacity = 256;
  static constexpr size_t kDefaultMaxSites = 1024;

  explicit Timeline(uint64_t interval_ms, size_t capacity = kDefaultCapacity,
                    size_t max_sites = kDefaultMaxSites);

  // Records a mark; returns its 1-based ordinal. `*sites` as from
  // Tracker::LiveDeviceBytesBySite, a scan the caller may reuse (reordered
  // here); the sample keeps the largest.
  uint64_t AddMark(uint64_t time_ns, std::string label, uint64_t device_bytes,
                   std::vector<std::pair<uint32_t, uint64_t>>* sites);
  void AddPeriodic(uint64_t time_ns, uint64_t device_bytes,
                   std::vector<std::pair<uint32_t, uint64_t>>* sites);

  TimelineSnapshot Snapshot() const;
  // Bytes the samples' site lists hold, both series: the bound above caps it.
  size_t SiteBytesHeld() const;
  // The newest two marks kept at most (the series is thinned: they may be
  // more than one mark apart), oldest first.
  std::vector<GrowthSample> LastMarks() const;

  // For pthread_atfork, like Tracker's.
  void LockForFork() { mu_.lock(); }
  void UnlockAfterFork() { mu_.unlock(); }

 private:
  GrowthSample MakeSample(uint64_t time_ns, uint64_t device_bytes,
                          std::vector<std::pair<uint32_t, uint64_t>>* sites) const;

  const uint64_t interval_ms_;
  const size_t capacity_;
  const size_t max_sites_;
  mutable Mutex mu_;
  SampleSeries marks_;     // guarded by mu_
  SampleSeries periodic_;  // guarded by mu_
};

// The largest `max` of *sites (a per-site scan in any order; reordered here)
// in increasing id order, in a vector of their size: what a sample keeps is
// then all it holds, whatever the scan's capacity.
std::vector<std::pair<uint32_t, uint64_t>> LargestSites(
    std::vector<std::pair<uint32_t, uint64_t>>* sites, size_t max);

enum class GrowthUnit { kMark, kSecond };

// "mark" or "second".
const char* GrowthUnitName(GrowthUnit unit);

// A site whose live bytes rise across the samples.
struct GrowthSuspect {
  uint32_t site = 0;  // canonical stack id
  GrowthUnit unit = GrowthUnit::kMark;
  double rate = 0;           // bytes per mark or per second over the growth window
  uint64_t first_bytes = 0;  // at the start of the growth window (its lowest point)
  uint64_t last_bytes = 0;   // at its end (the last sample with the site's most bytes)
  double from = 0;           // the window's start and end: mark ordinals or seconds
  double to = 0;
  size_t samples = 0;            // samples in the window
  std::vector<uint64_t> series;  // the site's bytes at every sample of the timeline
};

// Suspect rules, applied to each site's series (bytes at each sample, sites
// merged by `canonical`): the growth window runs from the last lowest point
// before the site's maximum to the last sample at that maximum, so memory
// freed at the end (or before a final mark) does not hide growth. The site
// is a suspect when, within the window, its bytes rose at least `min_rises`
// times, fell at most once per four rises, and still grew in the window's
// second half (which a cache that fills up and then plateaus does not).
struct GrowthRules {
  size_t min_rises = 3;
  size_t max_suspects = 100;
};

// Suspects, most growth (last_bytes - first_bytes) first. `samples` oldest
// first; for kMark their `mark` ordinals are the x axis, for kSecond their
// times. `canonical` maps a stack id to the site it is reported as (identity
// when null).
std::vector<GrowthSuspect> FindGrowthSuspects(
    const std::vector<GrowthSample>& samples, GrowthUnit unit,
    const std::function<uint32_t(uint32_t)>& canonical = nullptr, const GrowthRules& rules = {});

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_ANALYSIS_GROWTH_H_
