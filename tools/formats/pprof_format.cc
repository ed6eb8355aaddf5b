#include "tools/formats/pprof_format.h"

#include <zlib.h>

#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "libgpuwatch/symbolize/symbolizer.h"
#include "tools/pprof/profile.pb.h"

namespace gpuwatch::tools {

namespace {

namespace pb = perftools::profiles;

int64_t Signed(uint64_t v) {
  return v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
             ? std::numeric_limits<int64_t>::max()
             : static_cast<int64_t>(v);
}

// The sample types, in the order of every sample's values (Figures).
enum Value : size_t { kLiveBytes, kLiveCount, kAllocBytes, kAllocCount, kNumValues };
constexpr std::pair<const char*, const char*> kSampleTypes[kNumValues] = {
    {"live_space", "bytes"},
    {"live_objects", "count"},
    {"alloc_space", "bytes"},
    {"alloc_objects", "count"},
};
// The values of one sample, indexed by Value.
using Figures = std::array<uint64_t, kNumValues>;

class ProfileBuilder {
 public:
  ProfileBuilder() {
    String("");  // string_table[0] must be ""
    for (const auto& [type, unit] : kSampleTypes) {
      pb::ValueType* t = profile_.add_sample_type();
      t->set_type(String(type));
      t->set_unit(String(unit));
    }
    profile_.set_default_sample_type(String(kSampleTypes[kLiveBytes].first));
  }

  int64_t String(const std::string& s) {
    auto [it, inserted] = strings_.try_emplace(s, profile_.string_table_size());
    if (inserted) profile_.add_string_table(s);
    return it->second;
  }

  // A site's stack (frames innermost first) as location ids, leaf first.
  std::vector<uint64_t> Stack(const ReportSite& site) {
    std::vector<uint64_t> ids;
    if (site.frames.empty()) {
      // No stack (site 0, GPUWATCH_DEPTH=0): its location is all there is.
      const std::string& location = site.location;
      ids.push_back(LocationOf({Frame{location.empty() ? "<no stack>" : location, "", 0, ""}}));
      return ids;
    }
    // A frame marked inlined was inlined into the next one: they share one
    // pprof location, the inlined functions' lines first.
    std::vector<Frame> chain;
    for (const ReportFrame& f : site.frames) {
      chain.push_back(Frame{f.function, f.file, f.line, f.module});
      if (!f.inlined) {
        ids.push_back(LocationOf(chain));
        chain.clear();
      }
    }
    if (!chain.empty()) ids.push_back(LocationOf(chain));
    return ids;
  }

  void AddSample(const std::vector<uint64_t>& stack, const Figures& f,
                 const std::vector<std::pair<std::string, std::string>>& labels, int64_t site) {
    pb::Sample* s = profile_.add_sample();
    for (const uint64_t id : stack) s->add_location_id(id);
    for (const uint64_t v : f) s->add_value(Signed(v));
    if (site >= 0) {
      pb::Label* l = s->add_label();
      l->set_key(String("site"));
      l->set_num(site);
    }
    for (const auto& [key, value] : labels) {
      pb::Label* l = s->add_label();
      l->set_key(String(key));
      l->set_str(String(value));
    }
  }

  pb::Profile& profile() { return profile_; }

 private:
  struct Frame {
    std::string function;
    std::string file;
    uint64_t line;
    std::string module;
  };

  uint64_t FunctionOf(const Frame& f) {
    // Without a symbol a frame is named by its module, as in the text report.
    std::string name = f.function;
    if (name.empty()) name = std::string(Basename(f.module));
    if (name.empty()) name = "??";
    auto [it, inserted] = functions_.try_emplace({name, f.file}, profile_.function_size() + 1);
    if (inserted) {
      pb::Function* fn = profile_.add_function();
      fn->set_id(it->second);
      fn->set_name(String(name));
      fn->set_system_name(String(name));
      fn->set_filename(String(f.file));
    }
    return it->second;
  }

  uint64_t MappingOf(const Frame& f, bool inlined) {
    if (f.module.empty()) return 0;
    auto [it, inserted] = mappings_.try_emplace(f.module, profile_.mapping_size() + 1);
    pb::Mapping* m = nullptr;
    if (!inserted) {
      m = profile_.mutable_mapping(static_cast<int>(it->second - 1));
    } else {
      m = profile_.add_mapping();
      m->set_id(it->second);
      m->set_filename(String(f.module));
      // Every location carries its function already: pprof must not try to
      // symbolize the report's addresses-less locations against the module.
      m->set_has_functions(true);
    }
    if (!f.file.empty()) m->set_has_filenames(true);
    if (f.line != 0) m->set_has_line_numbers(true);
    if (inlined) m->set_has_inline_frames(true);
    return it->second;
  }

  uint64_t LocationOf(const std::vector<Frame>& chain) {
    std::string key;
    for (const Frame& f : chain) {
      key += f.function + '\0' + f.file + '\0' + std::to_string(f.line) + '\0' + f.module + '\0';
    }
    auto [it, inserted] = locations_.try_emplace(key, profile_.location_size() + 1);
    if (!inserted) return it->second;
    pb::Location* loc = profile_.add_location();
    loc->set_id(it->second);
    // The outermost function of the chain is the one in the module's code.
    loc->set_mapping_id(MappingOf(chain.back(), chain.size() > 1));
    for (const Frame& f : chain) {
      pb::Line* line = loc->add_line();
      line->set_function_id(FunctionOf(f));
      line->set_line(Signed(f.line));
    }
    return it->second;
  }

  pb::Profile profile_;
  std::unordered_map<std::string, int64_t> strings_;
  std::map<std::pair<std::string, std::string>, uint64_t> functions_;
  std::unordered_map<std::string, uint64_t> mappings_;
  std::unordered_map<std::string, uint64_t> locations_;
};

struct SiteSample {
  const ReportSite* site = nullptr;  // the entry with the richest stack seen
  Figures figures{};
};

}  // namespace

std::string PprofProfile(const ReportModel& m) {
  // Sites by id, in the order they first appear: leaks, then allocations.
  std::vector<SiteSample> samples;
  std::map<uint64_t, size_t> index;
  auto sample_of = [&](const ReportSite& site) -> SiteSample& {
    auto [it, inserted] = index.try_emplace(site.site, samples.size());
    if (inserted) samples.push_back({&site, {}});
    SiteSample& s = samples[it->second];
    if (site.frames.size() > s.site->frames.size()) s.site = &site;
    return s;
  };
  Figures omitted{};
  bool any_omitted = false;
  for (const LeakList* leaks : {&m.leaks_device, &m.leaks_host}) {
    uint64_t listed_count = 0;
    for (const LeakSite& site : leaks->sites) {
      SiteSample& s = sample_of(site);
      s.figures[kLiveBytes] += site.bytes;
      s.figures[kLiveCount] += site.count;
      listed_count += site.count;
    }
    if (leaks->omitted_bytes != 0 || leaks->omitted_sites != 0) {
      any_omitted = true;
      omitted[kLiveBytes] += leaks->omitted_bytes;
      omitted[kLiveCount] += leaks->count > listed_count ? leaks->count - listed_count : 0;
    }
  }
  for (const AllocSite& site : m.sites) {
    SiteSample& s = sample_of(site);
    s.figures[kAllocBytes] += site.alloc_bytes;
    s.figures[kAllocCount] += site.allocs;
  }

  ProfileBuilder b;
  for (const SiteSample& s : samples) {
    std::vector<std::pair<std::string, std::string>> labels;
    const ReportSite& site = *s.site;
    if (!site.location.empty()) labels.emplace_back("location", site.location);
    if (!site.category.value_or("").empty()) labels.emplace_back("category", *site.category);
    if (!site.suppressed.value_or("").empty()) {
      labels.emplace_back("suppressed", *site.suppressed);
    }
    b.AddSample(b.Stack(site), s.figures, labels, Signed(site.site));
  }
  if (any_omitted) {
    ReportSite omitted_site;
    omitted_site.location = "[omitted sites]";
    b.AddSample(b.Stack(omitted_site), omitted, {}, -1);
  }

  pb::Profile& p = b.profile();
  p.set_duration_nanos(Signed(m.process.elapsed_ns));
  const std::string command = CommandLine(m.process);
  if (!command.empty()) p.add_comment(b.String("command: " + command));
  p.add_comment(b.String("gpuwatch report, trigger " + m.trigger));
  return p.SerializeAsString();
}

bool Gzip(const std::string& data, std::string* out) {
  if (data.size() > std::numeric_limits<uInt>::max() / 2) return false;  // one deflate() call
  z_stream z{};
  // 15 window bits, +16 for a gzip header and trailer instead of zlib's.
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    return false;
  }
  out->resize(deflateBound(&z, data.size()));
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out->data());
  z.avail_out = static_cast<uInt>(out->size());
  const int rc = deflate(&z, Z_FINISH);
  out->resize(z.total_out);
  deflateEnd(&z);
  return rc == Z_STREAM_END;
}

}  // namespace gpuwatch::tools
