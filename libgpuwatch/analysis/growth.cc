#include "libgpuwatch/analysis/growth.h"

#include <algorithm>
#include <unordered_map>

namespace gpuwatch {

SampleSeries::SampleSeries(size_t capacity) : capacity_(std::max<size_t>(capacity, 2)) {}

void SampleSeries::Add(GrowthSample sample) {
  const uint64_t index = total_++;
  if (index % stride_ != 0) {
    newest_ = std::move(sample);
    return;
  }
  newest_.reset();
  kept_.emplace_back(index, std::move(sample));
  if (kept_.size() <= capacity_) return;
  // Full: keep every other sample, and from now on every other new one.
  stride_ *= 2;
  std::optional<GrowthSample> last;
  if (kept_.back().first % stride_ != 0) last = std::move(kept_.back().second);
  std::erase_if(kept_, [&](const auto& entry) { return entry.first % stride_ != 0; });
  newest_ = std::move(last);
}

std::vector<GrowthSample> SampleSeries::Samples() const {
  std::vector<GrowthSample> out;
  out.reserve(kept_.size() + 1);
  for (const auto& [index, sample] : kept_) out.push_back(sample);
  if (newest_.has_value()) out.push_back(*newest_);
  return out;
}

std::vector<GrowthSample> SampleSeries::Last(size_t n) const {
  std::vector<GrowthSample> out;
  const size_t from_newest = newest_.has_value() ? 1 : 0;
  const size_t from_kept = std::min(kept_.size(), n - std::min(n, from_newest));
  for (size_t i = kept_.size() - from_kept; i < kept_.size(); ++i) out.push_back(kept_[i].second);
  if (newest_.has_value() && n > 0) out.push_back(*newest_);
  return out;
}

size_t SampleSeries::SiteBytesHeld() const {
  const auto held = [](const GrowthSample& s) { return s.sites.capacity() * sizeof(s.sites[0]); };
  size_t bytes = newest_.has_value() ? held(*newest_) : 0;
  for (const auto& [index, sample] : kept_) bytes += held(sample);
  return bytes;
}

Timeline::Timeline(uint64_t interval_ms, size_t capacity, size_t max_sites)
    : interval_ms_(interval_ms),
      capacity_(capacity),
      max_sites_(max_sites),
      marks_(capacity),
      periodic_(capacity) {}

std::vector<std::pair<uint32_t, uint64_t>> LargestSites(
    std::vector<std::pair<uint32_t, uint64_t>>* sites, size_t max) {
  auto end = sites->end();
  if (sites->size() > max) {
    end = sites->begin() + static_cast<ptrdiff_t>(max);
    std::nth_element(sites->begin(), end, sites->end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
  }
  std::vector<std::pair<uint32_t, uint64_t>> kept(sites->begin(), end);
  std::sort(kept.begin(), kept.end());
  return kept;
}

GrowthSample Timeline::MakeSample(uint64_t time_ns, uint64_t device_bytes,
                                  std::vector<std::pair<uint32_t, uint64_t>>* sites) const {
  GrowthSample sample;
  sample.time_ns = time_ns;
  sample.device_bytes = device_bytes;
  sample.sites = LargestSites(sites, max_sites_);
  return sample;
}

uint64_t Timeline::AddMark(uint64_t time_ns, std::string label, uint64_t device_bytes,
                           std::vector<std::pair<uint32_t, uint64_t>>* sites) {
  GrowthSample sample = MakeSample(time_ns, device_bytes, sites);
  sample.label = std::move(label);
  std::lock_guard<Mutex> lock(mu_);
  sample.mark = marks_.total() + 1;
  const uint64_t mark = sample.mark;
  marks_.Add(std::move(sample));
  return mark;
}

void Timeline::AddPeriodic(uint64_t time_ns, uint64_t device_bytes,
                           std::vector<std::pair<uint32_t, uint64_t>>* sites) {
  GrowthSample sample = MakeSample(time_ns, device_bytes, sites);
  std::lock_guard<Mutex> lock(mu_);
  periodic_.Add(std::move(sample));
}

TimelineSnapshot Timeline::Snapshot() const {
  TimelineSnapshot snap;
  snap.capacity = capacity_;
  snap.interval_ms = interval_ms_;
  std::lock_guard<Mutex> lock(mu_);
  snap.marks = marks_.Samples();
  snap.periodic = periodic_.Samples();
  snap.marks_total = marks_.total();
  snap.periodic_total = periodic_.total();
  return snap;
}

size_t Timeline::SiteBytesHeld() const {
  std::lock_guard<Mutex> lock(mu_);
  return marks_.SiteBytesHeld() + periodic_.SiteBytesHeld();
}

std::vector<GrowthSample> Timeline::LastMarks() const {
  std::lock_guard<Mutex> lock(mu_);
  return marks_.Last(2);
}

const char* GrowthUnitName(GrowthUnit unit) {
  return unit == GrowthUnit::kMark ? "mark" : "second";
}

std::vector<GrowthSuspect> FindGrowthSuspects(const std::vector<GrowthSample>& samples,
                                              GrowthUnit unit,
                                              const std::function<uint32_t(uint32_t)>& canonical,
                                              const GrowthRules& rules) {
  const size_t n = samples.size();
  std::vector<GrowthSuspect> suspects;
  if (n < rules.min_rises + 1 || rules.min_rises == 0) return suspects;
  // A site can rise `min_rises` times only if it is live in as many samples:
  // build series for those sites alone.
  std::unordered_map<uint32_t, size_t> appearances;
  std::vector<std::vector<std::pair<uint32_t, uint64_t>>> merged(n);
  for (size_t i = 0; i < n; ++i) {
    std::unordered_map<uint32_t, uint64_t> by_site;
    for (const auto& [id, bytes] : samples[i].sites) {
      by_site[canonical ? canonical(id) : id] += bytes;
    }
    for (const auto& [site, bytes] : by_site) {
      if (bytes == 0) continue;
      merged[i].emplace_back(site, bytes);
      ++appearances[site];
    }
  }
  std::unordered_map<uint32_t, std::vector<uint64_t>> series;
  for (const auto& [site, count] : appearances) {
    if (count >= rules.min_rises) series[site].assign(n, 0);
  }
  for (size_t i = 0; i < n; ++i) {
    for (const auto& [site, bytes] : merged[i]) {
      auto it = series.find(site);
      if (it != series.end()) it->second[i] = bytes;
    }
  }
  auto x_of = [&](size_t i) {
    return unit == GrowthUnit::kMark ? static_cast<double>(samples[i].mark)
                                     : static_cast<double>(samples[i].time_ns) / 1e9;
  };
  for (auto& [site, s] : series) {
    size_t top = 0;  // last index of the maximum
    for (size_t i = 0; i < n; ++i) {
      if (s[i] >= s[top]) top = i;
    }
    size_t low = 0;  // last index of the minimum before it
    for (size_t i = 0; i <= top; ++i) {
      if (s[i] <= s[low]) low = i;
    }
    size_t rises = 0;
    size_t falls = 0;
    for (size_t i = low + 1; i <= top; ++i) {
      if (s[i] > s[i - 1]) ++rises;
      if (s[i] < s[i - 1]) ++falls;
    }
    const size_t mid = low + (top - low) / 2;
    if (rises < rules.min_rises || falls * 4 > rises || s[top] <= s[mid]) continue;
    const double span = x_of(top) - x_of(low);
    if (span <= 0) continue;
    GrowthSuspect g;
    g.site = site;
    g.unit = unit;
    g.first_bytes = s[low];
    g.last_bytes = s[top];
    g.rate = static_cast<double>(s[top] - s[low]) / span;
    g.from = x_of(low);
    g.to = x_of(top);
    g.samples = top - low + 1;
    g.series = std::move(s);
    suspects.push_back(std::move(g));
  }
  std::sort(suspects.begin(), suspects.end(), [](const GrowthSuspect& a, const GrowthSuspect& b) {
    const uint64_t ga = a.last_bytes - a.first_bytes;
    const uint64_t gb = b.last_bytes - b.first_bytes;
    return ga != gb ? ga > gb : a.site < b.site;
  });
  if (suspects.size() > rules.max_suspects) suspects.resize(rules.max_suspects);
  return suspects;
}

}  // namespace gpuwatch
