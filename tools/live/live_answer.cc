#include "tools/live/live_answer.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <utility>

#include "libgpuwatch/report/report_model.h"
#include "tools/live/live_growth.h"
#include "tools/reading/report_validate.h"

namespace gpuwatch::tools {
namespace {

using json = nlohmann::json;
using Reader = ReportFieldReader;

constexpr char kSchema[] = "gpuwatch-live";
constexpr int64_t kVersion = 1;

// The length of the UTF-8 character at `s[i]`, and its code point; 0 when
// the bytes there are not one.
size_t Utf8At(std::string_view s, size_t i, uint32_t* cp) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  size_t n = 4;
  uint32_t v = c & 0x07U;
  uint32_t least = 0x10000;
  if ((c & 0xE0) == 0xC0) {
    n = 2;
    v = c & 0x1FU;
    least = 0x80;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3;
    v = c & 0x0FU;
    least = 0x800;
  } else if ((c & 0xF8) != 0xF0) {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) return 0;
    v = (v << 6) | (b & 0x3FU);
  }
  if (v < least || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
  *cp = v;
  return n;
}

// Code points that reorder what a terminal shows after them.
bool Bidi(uint32_t cp) { return (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069); }

// A field that may be null or absent (unknown), read by `read` when it is
// there.
template <typename T, typename Read>
std::optional<T> Optional(Reader* r, const json& obj, const char* key, Read read) {
  if (Reader::Member(obj, key) == nullptr) return std::nullopt;
  const T v = read();
  if (r->failed()) return std::nullopt;
  return v;
}

// A finite number within 2^53, or unknown.
std::optional<double> OptionalReal(Reader* r, const json& obj, const std::string& path,
                                   const char* key) {
  return Optional<double>(r, obj, key, [&] { return r->RealAt(obj, path, key); });
}

std::optional<uint64_t> OptionalCount(Reader* r, const json& obj, const std::string& path,
                                      const char* key) {
  return Optional<uint64_t>(r, obj, key, [&] { return r->CountAt(obj, path, key); });
}

// Each element of the array `key` of `obj` that is an object, read by
// `read(element, path)`; an element of another type is a problem.
template <typename T, typename Read>
std::vector<T> Objects(Reader* r, const json& obj, const char* key, Read read) {
  std::vector<T> out;
  const json* list = r->ArrayAt(obj, "", key);
  if (list == nullptr) return out;
  for (size_t i = 0; i < list->size() && !r->failed(); ++i) {
    const std::string at = Reader::Element(key, i);
    const json& e = (*list)[i];
    if (!e.is_object()) {
      r->Expected(at, e, "an object");
      break;
    }
    out.push_back(read(e, at));
  }
  return out;
}

// The samples of the array `key` of `obj` (null: unknown), oldest first.
std::vector<std::optional<uint64_t>> ReadHistory(Reader* r, const json& obj,
                                                 const std::string& path, const char* key) {
  std::vector<std::optional<uint64_t>> out;
  if (const json* h = r->ArrayAt(obj, path, key)) {
    const std::string at = Reader::Join(path, key);
    for (size_t i = 0; i < h->size() && !r->failed(); ++i) {
      const json& v = (*h)[i];
      out.push_back(v.is_null() ? std::nullopt
                                : std::optional<uint64_t>(r->Count(v, Reader::Element(at, i))));
    }
  }
  return out;
}

LiveSite ReadSite(Reader* r, const json& e, const std::string& at) {
  LiveSite s;
  s.site = r->CountAt(e, at, "site");
  s.location = r->TextAt(e, at, "location");
  s.function = r->TextAt(e, at, "function");
  s.live_bytes = r->CountAt(e, at, "live_bytes");
  s.growth_per_min = OptionalReal(r, e, at, "growth_per_min");
  s.growth_per_mark = OptionalReal(r, e, at, "growth_per_mark");
  s.history = ReadHistory(r, e, at, "history");
  return s;
}

void ReadTotals(Reader* r, const json& doc, LiveState* out) {
  if (const json* d = r->ObjectAt(doc, "", "device")) {
    out->live_bytes = r->CountAt(*d, "device", "live_bytes");
    out->peak_bytes = r->CountAt(*d, "device", "peak_bytes");
    out->live_count = r->CountAt(*d, "device", "live_count");
  }
  if (const json* c = r->ObjectAt(doc, "", "counters")) {
    out->allocs = r->CountAt(*c, "counters", "allocs");
    out->frees = r->CountAt(*c, "counters", "frees");
    out->ooms = r->CountAt(*c, "counters", "ooms");
    out->kernel_launches = r->CountAt(*c, "counters", "kernel_launches");
    out->unknown_frees = r->CountAt(*c, "counters", "unknown_frees");
  }
  if (const json* t = r->ObjectAt(doc, "", "torch")) {
    out->torch = LiveState::Torch{
        r->TextAt(*t, "torch", "moment"), r->CountAt(*t, "torch", "reserved_bytes"),
        r->CountAt(*t, "torch", "allocated_bytes"), r->CountAt(*t, "torch", "segments")};
  }
  if (const json* parent = r->ObjectAt(doc, "", "parent")) {
    out->parent = LiveState::Parent{r->CountAt(*parent, "parent", "pid"),
                                    r->CountAt(*parent, "parent", "start_ticks")};
  }
  if (const json* a = r->ObjectAt(doc, "", "activity")) {
    out->last_activity_unix_ms = OptionalCount(r, *a, "activity", "last_unix_ms");
    out->idle_ns = OptionalCount(r, *a, "activity", "idle_ns");
  }
  if (const json* k = r->ObjectAt(doc, "", "kinds")) {
    for (const auto& [name, v] : k->items()) {
      const std::string at = Reader::Join("kinds", name.c_str());
      if (!v.is_object()) {
        r->Expected(at, v, "an object");
        break;
      }
      out->kinds.push_back({name, r->CountAt(v, at, "live_bytes"), r->CountAt(v, at, "peak_bytes"),
                            r->CountAt(v, at, "live_count"), r->CountAt(v, at, "allocs"),
                            r->CountAt(v, at, "alloc_bytes"), r->CountAt(v, at, "frees")});
    }
  }
  out->devices = Objects<LiveDevice>(r, doc, "devices", [r](const json& e, const std::string& at) {
    return LiveDevice{r->CountAt(e, at, "device"),     r->CountAt(e, at, "live_bytes"),
                      r->CountAt(e, at, "peak_bytes"), OptionalCount(r, e, at, "total_bytes"),
                      r->TextAt(e, at, "uuid"),        r->TextAt(e, at, "pci_bus_id"),
                      OptionalCount(r, e, at, "gpu")};
  });
  if (const json* c = r->ObjectAt(doc, "", "cgroup")) {
    out->cgroup = {r->TextAt(*c, "cgroup", "container_id"), r->TextAt(*c, "cgroup", "systemd_unit"),
                   r->TextAt(*c, "cgroup", "pod_uid"), r->TextAt(*c, "cgroup", "namespace"),
                   r->TextAt(*c, "cgroup", "pod")};
  }
  out->transfers =
      Objects<LiveTransfer>(r, doc, "transfers", [r](const json& e, const std::string& at) {
        return LiveTransfer{r->TextAt(e, at, "direction"),    r->TextAt(e, at, "host"),
                            r->CountAt(e, at, "count"),       r->CountAt(e, at, "bytes"),
                            r->CountAt(e, at, "timed_count"), r->CountAt(e, at, "duration_ns")};
      });
}

}  // namespace

bool ReadLiveState(const json& doc, LiveState* out, std::string* problem) {
  const json* schema = Reader::Member(doc, "schema");
  if (schema == nullptr || !schema->is_string() || *schema != kSchema) {
    const json* error = Reader::Member(doc, "error");
    *problem = error != nullptr && error->is_string()
                   ? "the process says: " + Printable(error->get_ref<const std::string&>(), 200)
                   : "not a gpuwatch live state";
    return false;
  }
  const json* version = Reader::Member(doc, "version");
  if (version != nullptr && !(version->is_number_integer() && *version == kVersion)) {
    *problem = "a live state of another version (this gpuwatch reads version 1)";
    return false;
  }
  Reader r;
  LiveState s;
  s.host = r.TextAt(doc, "", "host");
  s.rank = r.TextAt(doc, "", "rank");
  s.command = r.TextsAt(doc, "", "command");
  s.started_unix_ms = OptionalCount(&r, doc, "", "started_unix_ms");
  s.uptime_ns = r.CountAt(doc, "", "uptime_ns");
  ReadTotals(&r, doc, &s);
  if (const json* rates = r.ObjectAt(doc, "", "rates")) {
    s.device_bytes_per_min = OptionalReal(&r, *rates, "rates", "device_bytes_per_min");
    s.h2d_bytes_per_s = OptionalReal(&r, *rates, "rates", "h2d_bytes_per_s");
    s.d2h_bytes_per_s = OptionalReal(&r, *rates, "rates", "d2h_bytes_per_s");
  }
  if (const json* history = r.ObjectAt(doc, "", "history")) {
    s.history_interval_ms = r.CountAt(*history, "history", "interval_ms");
    s.device_history = ReadHistory(&r, *history, "history", "device_bytes");
  }
  s.device_growth = SustainedGrowthPerMin(s.device_history, s.history_interval_ms);
  s.marks = r.CountAt(doc, "", "marks");
  s.sites = Objects<LiveSite>(
      &r, doc, "sites", [&r](const json& e, const std::string& at) { return ReadSite(&r, e, at); });
  for (LiveSite& site : s.sites) {
    site.growth = SustainedGrowthPerMin(site.history, s.history_interval_ms);
  }
  if (const json* other = r.ObjectAt(doc, "", "other_sites")) {
    s.other_count = r.CountAt(*other, "other_sites", "count");
    s.other_bytes = r.CountAt(*other, "other_sites", "live_bytes");
  }
  if (r.failed()) {
    *problem = Printable(r.problem(), 300);
    return false;
  }
  *out = std::move(s);
  return true;
}

void GroupSitesByLocation(std::vector<LiveSite>* sites, uint64_t interval_ms) {
  std::vector<LiveSite> rows;
  std::map<std::pair<std::string, std::string>, size_t> index;
  for (LiveSite& s : *sites) {
    const auto [at, added] = index.try_emplace({s.location, s.function}, rows.size());
    if (added) {
      rows.push_back(std::move(s));
      continue;
    }
    LiveSite& row = rows[at->second];
    row.live_bytes += s.live_bytes;
    ++row.call_paths;
    if (row.growth_per_mark.has_value() && s.growth_per_mark.has_value()) {
      *row.growth_per_mark += *s.growth_per_mark;
    } else {
      row.growth_per_mark.reset();
    }
    if (row.growth_per_min.has_value() && s.growth_per_min.has_value()) {
      *row.growth_per_min += *s.growth_per_min;
    } else {
      row.growth_per_min.reset();
    }
    row.history.resize(std::max(row.history.size(), s.history.size()));
    for (size_t i = 0; i < row.history.size(); ++i) {
      if (i < s.history.size() && row.history[i].has_value() && s.history[i].has_value()) {
        *row.history[i] += *s.history[i];
      } else {
        row.history[i].reset();
      }
    }
  }
  for (LiveSite& row : rows) {
    if (row.call_paths > 1) row.growth = SustainedGrowthPerMin(row.history, interval_ms);
  }
  *sites = std::move(rows);
}

bool ParseLiveAnswer(std::string_view text, LiveState* out, std::string* problem) {
  if (text.size() > kMaxLiveAnswerBytes) {
    *problem = "an answer of more than " + std::to_string(kMaxLiveAnswerBytes >> 20) + " MiB";
    return false;
  }
  if (std::string deep = CheckNesting(text); !deep.empty()) {
    *problem = std::move(deep);
    return false;
  }
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) {
    *problem = "not a gpuwatch live state (" + std::to_string(text.size()) + " bytes)";
    return false;
  }
  if (ReadLiveState(doc, out, problem)) return true;
  if (*problem == "not a gpuwatch live state")
    *problem += " (" + std::to_string(text.size()) + " bytes)";
  return false;
}

std::string Printable(std::string_view text, size_t max_bytes) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    uint32_t cp = 0;
    const size_t n = Utf8At(text, i, &cp);
    char escape[16] = "";
    if (n == 0) {
      std::snprintf(escape, sizeof(escape), "\\x%02x", static_cast<unsigned char>(text[i]));
    } else if (cp < 0x20 || (cp >= 0x7F && cp <= 0x9F)) {
      std::snprintf(escape, sizeof(escape), "\\x%02x", static_cast<unsigned>(cp));
    } else if (Bidi(cp)) {
      std::snprintf(escape, sizeof(escape), "\\u%04x", static_cast<unsigned>(cp));
    }
    const std::string_view piece = escape[0] != '\0' ? std::string_view(escape) : text.substr(i, n);
    if (out.size() + piece.size() > max_bytes) break;
    out += piece;
    i += n == 0 ? 1 : n;
  }
  return out;
}

}  // namespace gpuwatch::tools
