// ReportFieldReader: typed fields out of a report's JSON, each failure named
// by its path (report_model.h).
#include <cmath>
#include <string>

#include "libgpuwatch/report/report_model.h"

namespace gpuwatch {

using nlohmann::json;
namespace key = report_key;

void ReportFieldReader::Fail(const std::string& path, const std::string& what) {
  if (!failed()) problem_ = path + " " + what;
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

// Byte counts, counts and nanoseconds: 2^53, exact in a double, 8 PiB or 104
// days; sums of many of them cannot overflow 64 bits.
constexpr uint64_t kMaxCount = uint64_t{1} << 53;

}  // namespace

void ReportFieldReader::Expected(const std::string& path, const json& v, const char* expected) {
  Fail(path, "is " + Shown(v) + ", expected " + expected);
}

std::string ReportFieldReader::Join(const std::string& path, const char* key) {
  return path.empty() ? key : path + "." + key;
}

std::string ReportFieldReader::Element(std::string path, size_t i) {
  path += '[';
  path += std::to_string(i);
  path += ']';
  return path;
}

const json* ReportFieldReader::Member(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it != obj.end() && !it->is_null() ? &*it : nullptr;
}

uint64_t ReportFieldReader::Count(const json& v, const std::string& path) {
  if (failed()) return 0;
  if (v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0)) {
    const auto n = v.get<uint64_t>();
    if (n <= kMaxCount) return n;
    Expected(path, v, "a count of at most 2^53");
    return 0;
  }
  Expected(path, v, v.is_number_integer() ? "a count (not negative)" : "a count (an integer)");
  return 0;
}

uint64_t ReportFieldReader::CountAt(const json& obj, const std::string& path, const char* key) {
  const json* v = Member(obj, key);
  return v != nullptr ? Count(*v, Join(path, key)) : 0;
}

int64_t ReportFieldReader::IntegerAt(const json& obj, const std::string& path, const char* key) {
  const json* v = Member(obj, key);
  if (v == nullptr || failed()) return 0;
  // An unsigned value of 2^63 or more would wrap to a negative int64_t (and
  // llabs of INT64_MIN is undefined): each sign is checked in its own type.
  const auto limit = static_cast<int64_t>(kMaxCount);
  if (v->is_number_unsigned() && v->get<uint64_t>() <= kMaxCount) return v->get<int64_t>();
  if (v->is_number_integer() && !v->is_number_unsigned() && v->get<int64_t>() >= -limit &&
      v->get<int64_t>() <= limit) {
    return v->get<int64_t>();
  }
  Expected(Join(path, key), *v, "an integer");
  return 0;
}

double ReportFieldReader::RealAt(const json& obj, const std::string& path, const char* key) {
  const json* v = Member(obj, key);
  if (v == nullptr || failed()) return 0;
  if (!v->is_number()) {
    Expected(Join(path, key), *v, "a number");
    return 0;
  }
  const double d = v->get<double>();
  if (!std::isfinite(d) || std::fabs(d) > static_cast<double>(kMaxCount)) {
    Expected(Join(path, key), *v, "a number of at most 2^53");
    return 0;
  }
  return d;
}

std::optional<std::string> ReportFieldReader::OptionalTextAt(const json& obj,
                                                             const std::string& path,
                                                             const char* key) {
  const json* v = Member(obj, key);
  if (v == nullptr || failed()) return std::nullopt;
  if (!v->is_string()) {
    Expected(Join(path, key), *v, "a string");
    return std::nullopt;
  }
  return v->get<std::string>();
}

std::string ReportFieldReader::TextAt(const json& obj, const std::string& path, const char* key) {
  return OptionalTextAt(obj, path, key).value_or("");
}

namespace {

const json* Typed(ReportFieldReader* r, const json& obj, const std::string& path, const char* key,
                  json::value_t type, const char* expected) {
  const json* v = ReportFieldReader::Member(obj, key);
  if (v == nullptr || r->failed()) return nullptr;
  if (v->type() != type) {
    r->Expected(ReportFieldReader::Join(path, key), *v, expected);
    return nullptr;
  }
  return v;
}

}  // namespace

const json* ReportFieldReader::ObjectAt(const json& obj, const std::string& path, const char* key) {
  return Typed(this, obj, path, key, json::value_t::object, "an object");
}

const json* ReportFieldReader::ArrayAt(const json& obj, const std::string& path, const char* key) {
  return Typed(this, obj, path, key, json::value_t::array, "an array");
}

std::vector<std::string> ReportFieldReader::TextsAt(const json& obj, const std::string& path,
                                                    const char* key) {
  std::vector<std::string> out;
  const json* list = ArrayAt(obj, path, key);
  if (list == nullptr) return out;
  for (size_t i = 0; i < list->size() && !failed(); ++i) {
    const json& v = (*list)[i];
    if (v.is_string()) {
      out.push_back(v.get<std::string>());
    } else {
      Expected(Element(Join(path, key), i), v, "a string");
    }
  }
  return out;
}

CountMap ReportFieldReader::CountMapAt(const json& obj, const std::string& path, const char* key) {
  CountMap out;
  if (const json* map = ObjectAt(obj, path, key)) {
    for (const auto& [name, v] : map->items()) {
      out[name] = Count(v, Join(path, key) + "." + name);
    }
  }
  return out;
}

std::vector<ReportFrame> ReportFieldReader::Frames(const json& frames, const std::string& path) {
  std::vector<ReportFrame> out;
  for (size_t i = 0; i < frames.size() && !failed(); ++i) {
    const json& f = frames[i];
    const std::string at = Element(path, i);
    if (!f.is_object()) {
      Expected(at, f, "an object (a frame)");
      break;
    }
    ReportFrame frame;
    frame.function = TextAt(f, at, key::kFunction);
    frame.file = TextAt(f, at, key::kFile);
    frame.module = TextAt(f, at, key::kModule);
    frame.line = CountAt(f, at, key::kLine);
    const json* inlined = Member(f, key::kInlined);
    frame.inlined = inlined != nullptr && inlined->is_boolean() && inlined->get<bool>();
    out.push_back(std::move(frame));
  }
  return out;
}

bool ReportFieldReader::Site(const json& site, const std::string& path, ReportSite* out) {
  if (failed()) return false;
  if (!site.is_object()) {
    Expected(path, site, "an object (a site)");
    return false;
  }
  out->site = CountAt(site, path, key::kSite);
  out->location = TextAt(site, path, key::kLocation);
  out->category = OptionalTextAt(site, path, key::kCategory);
  out->suppressed = OptionalTextAt(site, path, key::kSuppressed);
  out->processes = CountAt(site, path, key::kProcesses);
  if (const json* frames = ArrayAt(site, path, key::kFrames)) {
    out->frames = Frames(*frames, Join(path, key::kFrames));
  }
  if (const json* stack = ArrayAt(site, path, key::kStack)) {
    for (size_t i = 0; i < stack->size() && !failed(); ++i) {
      const std::string at = Element(Join(path, key::kStack), i);
      const uint64_t index = Count((*stack)[i], at);
      if (!failed() && index >= frame_table_size) {
        Fail(at, "is " + Shown((*stack)[i]) + ", past the end of frame_table (" +
                     std::to_string(frame_table_size) + " frames)");
      }
      out->stack.push_back(static_cast<uint32_t>(index));
    }
  }
  return !failed();
}

}  // namespace gpuwatch
