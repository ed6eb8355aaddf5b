// The trace section's types (model_trace.h): its field tables, its JSON
// writer and reader, and the text of its events.
#include <algorithm>
#include <charconv>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <string_view>
#include <utility>

#include "libgpuwatch/report/checkpoint_text.h"
#include "libgpuwatch/report/report_model.h"

namespace gpuwatch {

using nlohmann::json;

#define GPUWATCH_TRACE_COUNT_FIELD(member, rule) {#member, &Self::member, MergeRule::rule},
std::span<const CountField<ReportTraceDevice>> ReportTraceDevice::Counts() {
  using Self = ReportTraceDevice;
  static constexpr CountField<Self> kFields[] = {
      GPUWATCH_TRACE_DEVICE_COUNTS(GPUWATCH_TRACE_COUNT_FIELD)};
  return kFields;
}
std::span<const CountField<ReportTrace>> ReportTrace::Counts() {
  using Self = ReportTrace;
  static constexpr CountField<Self> kFields[] = {GPUWATCH_TRACE_COUNTS(GPUWATCH_TRACE_COUNT_FIELD)};
  return kFields;
}
#undef GPUWATCH_TRACE_COUNT_FIELD

namespace {

// What an element after the type holds (model_trace.h lists them by type).
enum class Slot : uint8_t {
  kTime,     // time_ns
  kEnd,      // end_ns
  kValue,    // value
  kStream,   // stream
  kDevice,   // device
  kSite,     // ref, a row of `sites`; the element is its site id
  kMemSite,  // the same, optional (has_ref): a `mem` event's site, absent in older reports
  kName,     // ref, an index into `names`
  kPhase,    // ref, an index into `phases`
  kLabel,    // ref, a row of `labels`; the element is the text
  kWord0,    // word[0], the text
  kWord1,    // word[1], the text
};

// Each type's name and elements after the type, in order: the one
// statement of an event's layout, which reading and both writers follow.
struct TypeInfo {
  const char* name;
  std::initializer_list<Slot> slots;
};
using S = Slot;
const TypeInfo kTypes[kNumTraceEventTypes] = {
    {"mem", {S::kTime, S::kDevice, S::kValue, S::kMemSite}},
    {"copy",
     {S::kTime, S::kEnd, S::kDevice, S::kStream, S::kValue, S::kWord0, S::kWord1, S::kSite}},
    {"kernel", {S::kTime, S::kEnd, S::kDevice, S::kStream, S::kName}},
    {"mark", {S::kTime, S::kValue, S::kLabel}},
    {"peak", {S::kTime, S::kValue}},
    {"oom", {S::kTime, S::kDevice, S::kValue, S::kWord0, S::kSite}},
    {"phase", {S::kTime, S::kEnd, S::kStream, S::kPhase}},
};

const TypeInfo& Info(TraceEventType type) { return kTypes[static_cast<size_t>(type)]; }

// The element that holds an event's site or index, and which it is (k 0:
// none).
struct Ref {
  size_t k = 0;
  Slot slot = S::kTime;
};
Ref RefOf(TraceEventType type) {
  size_t k = 1;
  for (const Slot slot : Info(type).slots) {
    if (slot == S::kSite || slot == S::kMemSite || slot == S::kName || slot == S::kPhase) {
      return {k, slot};
    }
    ++k;
  }
  return {};
}

constexpr uint64_t kMaxCount = uint64_t{1} << 53;  // ReportFieldReader::Count's
constexpr char kEventsPath[] = "trace.events";

std::string EventPath(size_t i) { return ReportFieldReader::Element(kEventsPath, i); }
std::string ElementPath(size_t i, size_t k) { return ReportFieldReader::Element(EventPath(i), k); }

}  // namespace

const char* TraceEventTypeName(TraceEventType type) { return Info(type).name; }

bool TraceTexts::Word(std::string_view text, uint16_t* index) {
  if (const auto it = words_.find(std::string(text)); it != words_.end()) {
    *index = it->second;
    return true;
  }
  if (trace_->words.size() > std::numeric_limits<uint16_t>::max()) return false;
  *index = static_cast<uint16_t>(trace_->words.size());
  trace_->words.emplace_back(text);
  words_.emplace(text, *index);
  return true;
}

uint32_t TraceTexts::Label(std::string_view text) {
  const auto [it, added] =
      labels_.try_emplace(std::string(text), static_cast<uint32_t>(trace_->labels.size()));
  if (added) trace_->labels.emplace_back(text);
  return it->second;
}

// Reading.

void TraceEventReader::Read(const json& event) {
  const size_t i = index_++;
  ReportFieldReader& r = *reader_;
  if (r.failed()) return;
  if (!event.is_array() || event.empty()) {
    r.Expected(EventPath(i), event, "an event (an array of its type and elements)");
    return;
  }
  const json& name = event[0];
  if (!name.is_string()) {
    r.Expected(ElementPath(i, 0), name, "an event type (a string)");
    return;
  }
  const auto* info = std::find_if(std::begin(kTypes), std::end(kTypes), [&name](const TypeInfo& t) {
    return name.get_ref<const std::string&>() == t.name;
  });
  if (info == std::end(kTypes)) {  // a newer gpuwatch's: ignored
    skipped_.push_back(i);
    return;
  }
  ReportTraceEvent e;
  e.type = static_cast<TraceEventType>(info - std::begin(kTypes));
  // The last element of a `mem` event (its site) is optional.
  const bool optional_last = info->slots.end()[-1] == S::kMemSite;
  const size_t elements = info->slots.size() + (optional_last ? 0 : 1);
  if (event.size() < elements) {
    r.Fail(EventPath(i), "is a \"" + std::string(info->name) + "\" event of " +
                             std::to_string(event.size()) + " elements, expected " +
                             std::to_string(elements));
    return;
  }
  // The checks are on the values; a path is made only for a problem.
  const auto count = [&](size_t k) -> uint64_t {
    const json& v = event[k];
    if (v.is_number_unsigned() && v.get<uint64_t>() <= kMaxCount) return v.get<uint64_t>();
    return r.Count(v, ElementPath(i, k));
  };
  const auto device = [&](size_t k) -> int32_t {
    const json& v = event[k];
    constexpr auto kMin = std::numeric_limits<int32_t>::min();
    constexpr auto kMax = std::numeric_limits<int32_t>::max();
    if (v.is_number_unsigned() && v.get<uint64_t>() <= static_cast<uint64_t>(kMax)) {
      return static_cast<int32_t>(v.get<uint64_t>());
    }
    if (v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() >= kMin &&
        v.get<int64_t>() <= kMax) {
      return static_cast<int32_t>(v.get<int64_t>());
    }
    r.Expected(ElementPath(i, k), v, "a device ordinal (a 32-bit integer)");
    return 0;
  };
  const auto text = [&](size_t k) -> const std::string* {
    const json& v = event[k];
    if (v.is_string()) return &v.get_ref<const std::string&>();
    r.Expected(ElementPath(i, k), v, "a string");
    return nullptr;
  };
  const auto word = [&](size_t k) -> uint16_t {
    uint16_t index = 0;
    const std::string* s = text(k);
    if (s != nullptr && !texts_.Word(*s, &index)) {
      r.Fail(ElementPath(i, k),
             "is one word too many: a trace's events name at most 65536 "
             "distinct directions and memory kinds");
    }
    return index;
  };
  // A site or an index into a table, checked by Resolve.
  const auto ref = [&](size_t k) -> uint32_t {
    const uint64_t n = count(k);
    if (n <= std::numeric_limits<uint32_t>::max()) return static_cast<uint32_t>(n);
    r.Fail(ElementPath(i, k),
           "is " + std::to_string(n) + ", expected an index or a site id " + "(below 2^32)");
    return 0;
  };
  size_t k = 1;
  for (const Slot slot : info->slots) {
    if (k >= event.size()) break;  // an optional element, absent
    switch (slot) {
      case S::kTime:
        e.time_ns = count(k);
        break;
      case S::kEnd:
        e.end_ns = count(k);
        break;
      case S::kValue:
        e.value = count(k);
        break;
      case S::kStream:
        e.stream = count(k);
        break;
      case S::kDevice:
        e.device = device(k);
        break;
      case S::kMemSite:
        e.has_ref = true;
        [[fallthrough]];
      case S::kSite:
      case S::kName:
      case S::kPhase:
        e.ref = ref(k);
        break;
      case S::kLabel:
        if (const std::string* label = text(k)) e.ref = texts_.Label(*label);
        break;
      case S::kWord0:
      case S::kWord1:
        e.word[slot == S::kWord1 ? 1 : 0] = word(k);
        break;
    }
    ++k;
  }
  if (!r.failed()) trace_->events.push_back(e);
}

void TraceEventReader::MoveTo(ReportTrace* trace) {
  trace->events = std::move(trace_->events);
  trace->words = std::move(trace_->words);
  trace->labels = std::move(trace_->labels);
  trace_ = trace;
}

void TraceEventReader::Resolve() {
  ReportFieldReader& r = *reader_;
  if (r.failed()) return;
  std::unordered_map<uint32_t, uint32_t> site_index;  // site id -> its first row
  for (size_t i = 0; i < trace_->sites.size(); ++i) {
    site_index.try_emplace(trace_->sites[i].site, static_cast<uint32_t>(i));
  }
  // Event j's place in trace.events, counting the events skipped before it.
  const auto place = [this](size_t j) {
    for (const size_t s : skipped_) {
      if (s > j) break;
      ++j;
    }
    return j;
  };
  for (size_t j = 0; j < trace_->events.size(); ++j) {
    ReportTraceEvent& e = trace_->events[j];
    const Ref ref = RefOf(e.type);
    if (ref.k == 0 || (ref.slot == S::kMemSite && !e.has_ref)) continue;
    if (ref.slot == S::kSite || ref.slot == S::kMemSite) {
      const auto it = site_index.find(e.ref);
      if (it == site_index.end()) {
        r.Fail(ElementPath(place(j), ref.k),
               "is " + std::to_string(e.ref) + ", a site trace.sites does not list");
        return;
      }
      e.ref = it->second;
      continue;
    }
    const bool name = ref.slot == S::kName;
    const size_t size = name ? trace_->names.size() : trace_->phases.size();
    if (e.ref >= size) {
      r.Fail(ElementPath(place(j), ref.k),
             "is " + std::to_string(e.ref) + ", past the end of trace." +
                 (name ? "names" : "phases") + ", which has " + std::to_string(size));
      return;
    }
  }
}

namespace {

// Each element of the array trace.KEY, an object, with its path.
template <typename Each>
void EachRow(ReportFieldReader* r, const json& trace, const char* key, const Each& each) {
  const json* list = r->ArrayAt(trace, "trace", key);
  if (list == nullptr) return;
  const std::string path = ReportFieldReader::Join("trace", key);
  for (size_t i = 0; i < list->size() && !r->failed(); ++i) {
    const json& row = (*list)[i];
    const std::string at = ReportFieldReader::Element(path, i);
    if (!row.is_object()) {
      r->Expected(at, row, "an object");
      return;
    }
    each(row, at);
  }
}

}  // namespace

bool ReadReportTrace(const json& trace, ReportTrace* out, ReportFieldReader* r) {
  const std::string path = "trace";
  r->CountsAt(trace, path, ReportTrace::Counts(), out);
  EachRow(r, trace, "devices", [r, out](const json& d, const std::string& at) {
    ReportTraceDevice& device = out->devices.emplace_back();
    device.device = r->IntegerAt(d, at, "device");
    r->CountsAt(d, at, ReportTraceDevice::Counts(), &device);
    device.uuid = r->TextAt(d, at, "uuid");
    device.pci_bus_id = r->TextAt(d, at, "pci_bus_id");
    if (ReportFieldReader::Member(d, "gpu") != nullptr) {
      device.gpu = static_cast<int64_t>(r->CountAt(d, at, "gpu"));
    }
  });
  EachRow(r, trace, "sites", [r, out](const json& s, const std::string& at) {
    ReportTraceSite& site = out->sites.emplace_back();
    const uint64_t id = r->CountAt(s, at, report_key::kSite);
    if (id > std::numeric_limits<uint32_t>::max()) {
      r->Fail(at + ".site", "is " + std::to_string(id) + ", expected a site id (below 2^32)");
    }
    site.site = static_cast<uint32_t>(id);
    site.location = r->TextAt(s, at, report_key::kLocation);
  });
  out->names = r->TextsAt(trace, path, "names");
  out->phases = r->TextsAt(trace, path, "phases");
  if (const json* events = r->ArrayAt(trace, path, report_key::kEvents)) {
    TraceEventReader reader(out, r);
    for (const json& e : *events) reader.Read(e);
    reader.Resolve();
  }
  return !r->failed();
}

// Writing.

namespace {

// Calls number(v) for each numeric element of `e` after its type, and
// text(true, row) for a label (a row of `labels`), text(false, row) for a
// word: what the JSON and the text writer share.
template <typename Number, typename Text>
void EachElement(const ReportTrace& t, const ReportTraceEvent& e, const Number& number,
                 const Text& text) {
  for (const Slot slot : Info(e.type).slots) {
    switch (slot) {
      case S::kTime:
        number(e.time_ns);
        break;
      case S::kEnd:
        number(e.end_ns);
        break;
      case S::kValue:
        number(e.value);
        break;
      case S::kStream:
        number(e.stream);
        break;
      case S::kDevice:
        number(e.device);
        break;
      case S::kMemSite:
        if (e.has_ref) number(t.SiteOf(e).site);
        break;
      case S::kSite:
        number(t.SiteOf(e).site);
        break;
      case S::kName:
      case S::kPhase:
        number(e.ref);
        break;
      case S::kLabel:
        text(true, e.ref);
        break;
      case S::kWord0:
      case S::kWord1:
        text(false, e.word[slot == S::kWord1 ? 1 : 0]);
        break;
    }
  }
}

json EventJson(const ReportTrace& t, const ReportTraceEvent& e) {
  json out = json::array({TraceEventTypeName(e.type)});
  EachElement(
      t, e, [&out](auto v) { out.push_back(v); },
      [&t, &out](bool label, size_t row) { out.push_back(label ? t.labels[row] : t.words[row]); });
  return out;
}

}  // namespace

json ReportTraceJson(const ReportTrace& t, bool with_events, bool with_sites) {
  json out = json::object();
  for (const CountField<ReportTrace>& f : ReportTrace::Counts()) out[f.key] = t.*f.member;
  json devices = json::array();
  for (const ReportTraceDevice& d : t.devices) {
    json row = {{"device", d.device}};
    for (const CountField<ReportTraceDevice>& f : ReportTraceDevice::Counts()) {
      row[f.key] = d.*f.member;
    }
    if (!d.uuid.empty()) row["uuid"] = d.uuid;
    if (!d.pci_bus_id.empty()) row["pci_bus_id"] = d.pci_bus_id;
    if (d.gpu >= 0) row["gpu"] = d.gpu;
    devices.push_back(std::move(row));
  }
  out["devices"] = std::move(devices);
  if (with_sites) {
    json sites = json::array();
    for (const ReportTraceSite& s : t.sites) {
      sites.push_back({{report_key::kSite, s.site}, {report_key::kLocation, s.location}});
    }
    out["sites"] = std::move(sites);
  }
  out["names"] = t.names;
  out["phases"] = t.phases;
  if (with_events) {
    json events = json::array();
    for (const ReportTraceEvent& e : t.events) events.push_back(EventJson(t, e));
    out[report_key::kEvents] = std::move(events);
  }
  return out;
}

namespace {

// A string as JSON text, as DumpReport writes it (not UTF-8: U+FFFD).
std::string Quoted(const std::string& text) {
  return json(text).dump(-1, ' ', false, json::error_handler_t::replace);
}

std::vector<std::string> QuotedAll(const std::vector<std::string>& texts) {
  std::vector<std::string> out;
  out.reserve(texts.size());
  for (const std::string& t : texts) out.push_back(Quoted(t));
  return out;
}

// One event's text, made in a buffer on the stack and appended to the
// report's text in one piece: appended element by element (a dozen small
// appends, each checking the string's capacity), a checkpoint's 20,000
// events cost ~1,000 instructions each.
class EventLine {
 public:
  explicit EventLine(std::string* out) : out_(out) {}
  void Add(std::string_view text) {
    if (text.size() > sizeof(buf_) - used_) {
      Flush();
      if (text.size() > sizeof(buf_)) {  // a long label
        out_->append(text);
        return;
      }
    }
    std::memcpy(buf_ + used_, text.data(), text.size());
    used_ += text.size();
  }
  template <typename T>
  void Number(T n) {
    if (sizeof(buf_) - used_ < kNumberChars) Flush();
    used_ = static_cast<size_t>(std::to_chars(buf_ + used_, buf_ + sizeof(buf_), n).ptr - buf_);
  }
  void Flush() {
    out_->append(buf_, used_);
    used_ = 0;
  }

 private:
  static constexpr size_t kNumberChars = 24;  // any integer, sign included
  std::string* out_;
  char buf_[256];
  size_t used_ = 0;
};

}  // namespace

TraceEventText::TraceEventText(const ReportTrace& trace)
    : trace_(trace), words_(QuotedAll(trace.words)), labels_(QuotedAll(trace.labels)) {}

void TraceEventText::Append(const ReportTraceEvent& e, std::string_view open,
                            std::string_view separator, std::string_view close,
                            std::string* out) const {
  EventLine line(out);
  line.Add(open);
  line.Add("\"");
  line.Add(TraceEventTypeName(e.type));
  line.Add("\"");
  EachElement(
      trace_, e,
      [separator, &line](auto v) {
        line.Add(separator);
        line.Number(v);
      },
      [this, separator, &line](bool label, size_t row) {
        line.Add(separator);
        line.Add(label ? labels_[row] : words_[row]);
      });
  line.Add(close);
  line.Flush();
}

std::string ReportModel::Dump(json doc, const TextFlush* flush, CheckpointText* kept) const {
  const json given = kept != nullptr && kept->rows_taken() ? doc : json();
  ToJson(&doc, /*trace_events=*/false, /*trace_sites=*/kept == nullptr);
  TraceEventLines lines;
  bool spliced = true;
  if (kept != nullptr && kept->rows_taken()) {
    kept->MarkRows(&doc);
    lines.head = [kept, &spliced](std::string* head) { return spliced = kept->SpliceRows(head); };
  }
  if (kept != nullptr) {
    lines.frames = kept->frames();
    lines.frame = [kept](size_t i, std::string* out) { *out += kept->frame(i); };
    if (trace.has_value()) {
      lines.trace_sites = [this, kept](std::string* out) {
        kept->AppendTraceSites(trace->sites, out);
      };
    }
    if (trace.has_value() && kept->trace_lines().begun()) {
      lines.reuse = [kept](size_t i, uint64_t at, std::string* out) {
        return kept->trace_lines().Lines(i, at, out);
      };
    }
  }
  std::string out;
  if (!trace.has_value()) {
    out = DumpReport(std::move(doc), kept != nullptr ? &lines : nullptr, flush);
  } else {
    const TraceEventText text(*trace);
    lines.count = trace->events.size();
    lines.append = [this, &text](size_t i, std::string* o) { text.Append(trace->events[i], o); };
    out = DumpReport(std::move(doc), &lines, flush);
  }
  if (spliced) return out;
  // Never expected (SpliceRows found its markers elsewhere): nothing was
  // written; the report as if no row were kept.
  ReportModel whole = *this;
  kept->GiveRowsBack(&whole);
  return whole.Dump(given, flush, kept);
}

}  // namespace gpuwatch
