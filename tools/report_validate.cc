#include "tools/report_validate.h"

#include <cmath>
#include <initializer_list>

#include "libgpuwatch/report/report_schema.h"

namespace gpuwatch::tools {

using nlohmann::json;

std::string CheckNesting(std::string_view text) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxReportDepth) {
        return "nested deeper than " + std::to_string(kMaxReportDepth) + " levels (at byte " +
               std::to_string(i) + ")";
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return "";
}

namespace {

// A short rendering of a value for a message: the file may hold megabytes.
std::string Shown(const json& v) {
  if (v.is_object()) return "an object";
  if (v.is_array()) return "an array";
  std::string text = v.dump();
  if (text.size() > 40) text = text.substr(0, 32) + "...";
  return text;
}

class Checker {
 public:
  const std::string& problem() const { return problem_; }
  bool failed() const { return !problem_.empty(); }

  void Fail(const std::string& path, const std::string& what) {
    if (!failed()) problem_ = path + " " + what;
  }
  void Expected(const std::string& path, const json& v, const char* expected) {
    Fail(path, "is " + Shown(v) + ", expected " + expected);
  }

  // Every string (keys too) of the document within kMaxReportString. The
  // document is at most kMaxReportDepth deep (CheckNesting), so recursion is
  // bounded.
  void Strings(const json& v, const std::string& path) {
    if (failed()) return;
    if (v.is_string()) {
      const size_t n = v.get_ref<const std::string&>().size();
      if (n > kMaxReportString) {
        Fail(path, "is a string of " + std::to_string(n) + " bytes (at most " +
                       std::to_string(kMaxReportString) + ")");
      }
    } else if (v.is_object()) {
      for (const auto& [key, member] : v.items()) {
        if (key.size() > kMaxReportString) {
          Fail(path, "has a key of " + std::to_string(key.size()) + " bytes");
          return;
        }
        Strings(member, Join(path, key.c_str()));
      }
    } else if (v.is_array()) {
      for (size_t i = 0; i < v.size() && !failed(); ++i) {
        Strings(v[i], path + "[" + std::to_string(i) + "]");
      }
    }
  }

  // The member `key` when `obj` has it, else null.
  static const json* Member(const json& obj, const char* key) {
    if (!obj.is_object()) return nullptr;
    auto it = obj.find(key);
    return it != obj.end() ? &*it : nullptr;
  }

  static std::string Join(const std::string& path, const char* key) {
    return path.empty() ? key : path + "." + key;
  }

  // A byte count, a count or nanoseconds: an integer in [0, kMaxReportCount].
  void Count(const json& v, const std::string& path) {
    if (failed()) return;
    if (v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0)) {
      if (v.get<uint64_t>() > kMaxReportCount) Expected(path, v, "a count of at most 2^53");
      return;
    }
    Expected(path, v, v.is_number_integer() ? "a count (not negative)" : "a count (an integer)");
  }
  void Counts(const json& obj, const std::string& path, std::initializer_list<const char*> keys) {
    for (const char* key : keys) {
      if (const json* v = Member(obj, key)) Count(*v, Join(path, key));
    }
  }

  // A rate or a window bound: a number, finite, within +-kMaxReportCount.
  void Reals(const json& obj, const std::string& path, std::initializer_list<const char*> keys) {
    for (const char* key : keys) {
      const json* v = Member(obj, key);
      if (v == nullptr || failed()) continue;
      const double max = static_cast<double>(kMaxReportCount);
      if (!v->is_number()) {
        Expected(Join(path, key), *v, "a number");
      } else if (const double d = v->get<double>(); !std::isfinite(d) || std::fabs(d) > max) {
        Expected(Join(path, key), *v, "a number of at most 2^53");
      }
    }
  }

  void Texts(const json& obj, const std::string& path, std::initializer_list<const char*> keys) {
    for (const char* key : keys) {
      const json* v = Member(obj, key);
      if (v != nullptr && !v->is_string()) Expected(Join(path, key), *v, "a string");
    }
  }

  // A section: absent and null are fine (readers skip it); anything else but
  // `object`/`array` is not.
  const json* Object(const json& obj, const std::string& path, const char* key) {
    return Typed(obj, path, key, json::value_t::object, "an object");
  }
  const json* Array(const json& obj, const std::string& path, const char* key) {
    return Typed(obj, path, key, json::value_t::array, "an array");
  }

  void StringList(const json& obj, const std::string& path, const char* key) {
    if (const json* list = Array(obj, path, key)) {
      for (size_t i = 0; i < list->size(); ++i) {
        if (!(*list)[i].is_string()) {
          Expected(Join(path, key) + "[" + std::to_string(i) + "]", (*list)[i], "a string");
        }
      }
    }
  }

  // Every member of an object is a count (kinds, categories).
  void CountMap(const json& obj, const std::string& path, const char* key) {
    if (const json* map = Object(obj, path, key)) {
      for (const auto& [name, v] : map->items()) Count(v, Join(path, key) + "." + name);
    }
  }

  // Every member of an object is an object whose `keys` are counts.
  void CountTable(const json& obj, const std::string& path, const char* key,
                  std::initializer_list<const char*> keys) {
    const json* table = Object(obj, path, key);
    if (table == nullptr) return;
    for (const auto& [name, row] : table->items()) {
      const std::string at = Join(path, key) + "." + name;
      if (!row.is_object()) {
        Expected(at, row, "an object");
        return;
      }
      Counts(row, at, keys);
    }
  }

  // One element of a list of sites: leaks, peak, allocation sites, growth
  // suspects, transfer sites, the oom request.
  void Site(const json& site, const std::string& path) {
    if (failed()) return;
    if (!site.is_object()) {
      Expected(path, site, "an object (a site)");
      return;
    }
    Counts(site, path,
           {"site",
            "bytes",
            "count",
            "alloc_bytes",
            "allocs",
            "largest",
            "live_device_bytes",
            "live_device_count",
            "oldest_ns",
            "processes",
            "first_bytes",
            "last_bytes",
            "growth_bytes",
            "samples",
            "timed_count",
            "duration_ns",
            "size",
            "device_free_bytes",
            "device_total_bytes",
            "host_allocs",
            "host_alloc_bytes"});
    Reals(site, path, {"rate", "from", "to"});
    Texts(site, path, {"location", "category", "suppressed", "unit", "api", "kind"});
    CountMap(site, path, "kinds");
    if (const json* frames = Array(site, path, report_key::kFrames)) {
      Frames(*frames, Join(path, report_key::kFrames));
    }
    if (const json* stack = Array(site, path, report_key::kStack)) {
      for (size_t i = 0; i < stack->size() && !failed(); ++i) {
        const json& index = (*stack)[i];
        const std::string at = Join(path, report_key::kStack) + "[" + std::to_string(i) + "]";
        Count(index, at);
        if (!failed() && index.get<uint64_t>() >= frame_table_size_) {
          Fail(at, "is " + Shown(index) + ", past the end of frame_table (" +
                       std::to_string(frame_table_size_) + " frames)");
        }
      }
    }
  }

  // A list of frames: a site's (version 1) or the report's frame table.
  void Frames(const json& frames, const std::string& path) {
    for (size_t i = 0; i < frames.size() && !failed(); ++i) {
      const json& f = frames[i];
      const std::string at = path + "[" + std::to_string(i) + "]";
      if (!f.is_object()) {
        Expected(at, f, "an object (a frame)");
        return;
      }
      Texts(f, at, {report_key::kFunction, report_key::kFile, report_key::kModule});
      Counts(f, at, {report_key::kLine});
    }
  }

  // The frame table, checked before the sites that index it.
  void FrameTable(const json& doc) {
    const json* table = Array(doc, "", report_key::kFrameTable);
    if (table == nullptr) return;
    Frames(*table, report_key::kFrameTable);
    frame_table_size_ = table->size();
  }

  // Every element of the array `key` is an object, which `each(element, its
  // path)` checks; the first that is not fails the report.
  template <typename Each>
  void ObjectList(const json& obj, const std::string& path, const char* key, const Each& each) {
    const json* list = Array(obj, path, key);
    if (list == nullptr) return;
    for (size_t i = 0; i < list->size() && !failed(); ++i) {
      const json& element = (*list)[i];
      const std::string at = Join(path, key) + "[" + std::to_string(i) + "]";
      if (!element.is_object()) {
        Expected(at, element, "an object");
        return;
      }
      each(element, at);
    }
  }

  void SiteList(const json& obj, const std::string& path, const char* key) {
    if (const json* list = Array(obj, path, key)) {
      for (size_t i = 0; i < list->size() && !failed(); ++i) {
        Site((*list)[i], Join(path, key) + "[" + std::to_string(i) + "]");
      }
    }
  }

  void LeakSection(const json& leaks, const char* which) {
    const json* s = Object(leaks, "leaks", which);
    if (s == nullptr) return;
    const std::string path = std::string("leaks.") + which;
    Counts(*s, path,
           {report_key::kBytes, report_key::kCount, report_key::kOmittedSites,
            report_key::kOmittedBytes, report_key::kLeakedBytes, report_key::kLeakedCount,
            report_key::kSuppressedBytes, report_key::kCategorizedBytes});
    CountMap(*s, path, report_key::kCategories);
    SiteList(*s, path, report_key::kSites);
  }

 private:
  const json* Typed(const json& obj, const std::string& path, const char* key, json::value_t type,
                    const char* expected) {
    const json* v = Member(obj, key);
    if (v == nullptr || v->is_null() || failed()) return nullptr;
    if (v->type() != type) {
      Expected(Join(path, key), *v, expected);
      return nullptr;
    }
    return v;
  }

  std::string problem_;
  size_t frame_table_size_ = 0;
};

}  // namespace

std::string ValidateReport(const json& doc) {
  Checker c;
  c.Strings(doc, "");
  if (c.failed()) return c.problem();
  c.Texts(doc, "", {report_key::kTrigger, report_key::kLabel, "unwinder"});
  c.Counts(doc, "",
           {report_key::kStackDepth, "tool_frames", "unwind_fallbacks", report_key::kMergedFrom});
  c.FrameTable(doc);
  if (const json* process = c.Object(doc, "", report_key::kProcess)) {
    c.Counts(*process, "process", {"pid", "elapsed_ns"});
    c.Texts(*process, "process", {"host", "rank"});
    c.StringList(*process, "process", "command");
  }
  c.ObjectList(doc, "", report_key::kProcesses, [&c](const json& p, const std::string& path) {
    c.Counts(p, path,
             {"pid", "elapsed_ns", "device_peak_bytes", "device_current_bytes", "leaked_bytes",
              "allocs"});
    c.Texts(p, path, {"file", "host", "rank", "trigger"});
    c.StringList(p, path, "command");
  });
  if (const json* totals = c.Object(doc, "", report_key::kTotals)) {
    c.Counts(*totals, "totals",
             {"device_current_bytes", "device_peak_bytes", "device_live_count",
              "host_current_bytes", "host_live_count", "unknown_frees", "kernel_launches",
              "oom_count", "dropped_allocs", "stacks_dropped", "python_frames_dropped"});
    c.CountTable(
        *totals, "totals", "kinds",
        {"current_bytes", "current_count", "peak_bytes", "allocs", "alloc_bytes", "frees"});
    c.CountTable(*totals, "totals", "copies", {"count", "bytes"});
  }
  if (const json* leaks = c.Object(doc, "", report_key::kLeaks)) {
    c.LeakSection(*leaks, report_key::kDevice);
    c.LeakSection(*leaks, report_key::kHost);
  }
  if (const json* peak = c.Object(doc, "", report_key::kPeak)) {
    c.Counts(*peak, "peak", {"device_bytes", "sites_at_device_bytes", "sites_time_ns"});
    c.CountMap(*peak, "peak", "kinds");
    c.SiteList(*peak, "peak", report_key::kSites);
  }
  c.SiteList(doc, "", report_key::kSites);
  if (const json* growth = c.Object(doc, "", report_key::kGrowth)) {
    c.Texts(*growth, "growth", {"basis"});
    c.Counts(*growth, "growth", {"samples"});
    c.SiteList(*growth, "growth", report_key::kSuspects);
  }
  if (const json* transfers = c.Object(doc, "", report_key::kTransfers)) {
    c.ObjectList(*transfers, "transfers", "totals", [&c](const json& t, const std::string& path) {
      c.Texts(t, path, {"direction", "host"});
      c.Counts(t, path, {"count", "bytes", "timed_count", "duration_ns"});
    });
    c.SiteList(*transfers, "transfers", report_key::kSites);
    c.ObjectList(*transfers, "transfers", "findings", [&c](const json& f, const std::string& path) {
      c.Texts(f, path, {"type", "message", "advice", "location"});
    });
  }
  if (const json* timeline = c.Object(doc, "", report_key::kTimeline))
    c.SiteList(*timeline, "timeline", report_key::kSites);
  if (const json* oom = c.Object(doc, "", report_key::kOom)) c.Site(*oom, "oom");
  return c.problem();
}

}  // namespace gpuwatch::tools
