#include "libgpuwatch/report/report_schema.h"

#include <algorithm>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "libgpuwatch/symbolize/symbolizer.h"
#include "nlohmann/json.hpp"

namespace gpuwatch {

using nlohmann::json;
namespace key = report_key;

bool PhasePathBefore(std::string_view a, std::string_view b) {
  return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return (x == '/' ? '\0' : x) < (y == '/' ? '\0' : y);
  });
}

void ForEachReportSite(json* doc, const std::function<void(json&)>& fn) {
  if (!doc->is_object()) return;
  const auto each_in = [&fn](json& parent, const char* list_key) {
    if (!parent.is_object()) return;
    const auto list = parent.find(list_key);
    if (list == parent.end() || !list->is_array()) return;
    for (json& site : *list) {
      if (site.is_object()) fn(site);
    }
  };
  for (const char* section : {key::kPeak, key::kGrowth, key::kTransfers, key::kTimeline}) {
    if (const auto it = doc->find(section); it != doc->end()) {
      each_in(*it, key::kSites);
      each_in(*it, key::kSuspects);
    }
  }
  if (const auto leaks = doc->find(key::kLeaks); leaks != doc->end() && leaks->is_object()) {
    for (auto& [kind, section] : leaks->items()) each_in(section, key::kSites);
  }
  each_in(*doc, key::kSites);
  if (const auto regions = doc->find(key::kRegions); regions != doc->end()) {
    for (const char* list : {key::kSites, key::kSegments, key::kHeaps}) each_in(*regions, list);
  }
  if (const auto oom = doc->find(key::kOom); oom != doc->end() && oom->is_object()) fn(*oom);
  if (const auto errors = doc->find(key::kCudaErrors); errors != doc->end()) {
    each_in(*errors, "calls");
    each_in(*errors, "sticky");
    if (const auto sticky = errors->find("sticky"); sticky != errors->end() && sticky->is_array()) {
      for (json& s : *sticky) each_in(s, "kernels");
    }
  }
}

json FrameTableJson(const std::vector<const Frame*>& table) {
  json out = json::array();
  for (const Frame* f : table) {
    json frame = {{key::kFunction, f->function},
                  {key::kFile, f->file},
                  {key::kLine, f->line},
                  {key::kModule, f->module}};
    if (f->inlined) frame[key::kInlined] = true;
    out.push_back(std::move(frame));
  }
  return out;
}

void InlineFrameTable(json* doc) {
  if (!doc->is_object()) return;
  const auto table_it = doc->find(key::kFrameTable);
  if (table_it == doc->end()) return;
  const json table = std::move(*table_it);
  doc->erase(table_it);
  if (!table.is_array()) return;
  ForEachReportSite(doc, [&table](json& site) {
    const auto stack = site.find(key::kStack);
    if (stack == site.end()) return;
    json frames = json::array();
    if (stack->is_array()) {
      for (const json& index : *stack) {
        if (index.is_number_unsigned() && index.get<uint64_t>() < table.size()) {
          frames.push_back(table[index.get<size_t>()]);
        }
      }
    }
    site.erase(stack);
    site[key::kFrames] = std::move(frames);
  });
}

LeakVerdict LeakSplitFigures::Add(uint64_t bytes, uint64_t count, bool suppressed,
                                  std::string_view category, bool categories_leak) {
  if (suppressed) {
    suppressed_bytes += bytes;
    suppressed_count += count;
    return LeakVerdict::kSuppressed;
  }
  if (!category.empty() && !categories_leak) {
    categorized_bytes += bytes;
    categorized_count += count;
    auto it = categories.find(category);
    if (it == categories.end()) it = categories.emplace(std::string(category), 0).first;
    it->second += bytes;
    return LeakVerdict::kCategorized;
  }
  leaked_bytes += bytes;
  leaked_count += count;
  return LeakVerdict::kLeaked;
}

void LeakSplitFigures::WriteTo(json* section) const {
  json& s = *section;
  s[key::kLeakedBytes] = LeakedBytesOf(s.value(key::kBytes, uint64_t{0}));
  s[key::kLeakedCount] = s.value(key::kCount, uint64_t{0}) - suppressed_count - categorized_count;
  s[key::kSuppressedBytes] = suppressed_bytes;
  s[key::kCategorizedBytes] = categorized_bytes;
  json by_category = json::object();
  for (const auto& [name, bytes] : categories) by_category[name] = bytes;
  s[key::kCategories] = std::move(by_category);
}

// json::dump(2) prints an array of numbers one number per line; every site's
// `stack` is one, so they are put back on one line: `"stack": [0, 1, 2]`.
// The pattern cannot occur inside a string, where the quotes are escaped.
std::string OneLineStacks(const std::string& text) {
  static constexpr std::string_view kKey = "\"stack\": [";
  std::string out;
  out.reserve(text.size());
  size_t from = 0;
  for (size_t at = text.find(kKey); at != std::string::npos; at = text.find(kKey, from)) {
    const size_t open = at + kKey.size();
    out.append(text, from, open - from);
    size_t i = open;
    for (; i < text.size() && text[i] != ']'; ++i) {
      const char c = text[i];
      if (c == ',') {
        out += ", ";
      } else if (c != ' ' && c != '\n') {
        out += c;
      }
    }
    from = i;  // the ']' and what follows
  }
  out.append(text, from, std::string::npos);
  return out;
}

namespace {

// json::dump, with bytes that are not UTF-8 (a path or an argument in
// another encoding) written as U+FFFD: the default throws, which would end
// the host program.
std::string Text(const json& value, int indent = -1) {
  return value.dump(indent, ' ', false, json::error_handler_t::replace);
}

// The sections DumpReport prints by hand, one element per line, after the
// rest: appended to `out`, the document's text so far, in place (the trace's
// events are the bulk of a report: written once, into the one buffer that
// becomes the report, not into a text of their own copied after the rest).
// With `flush`, the text is handed over as it grows (TextFlush), so that
// the trace is never whole in memory.
void AppendTail(json* frame_table, json* trace, const TraceEventLines* trace_events,
                const TextFlush* flush, bool after_head, std::string* out) {
  std::string& tail = *out;
  // Without a head, the first section opens the document.
  char separator = after_head ? ',' : '{';
  uint64_t handed = 0;  // the text's bytes given to `flush`
  const auto maybe_flush = [flush, &tail, &handed] {
    if (flush == nullptr || tail.size() < flush->chunk) return;
    flush->take(&tail);
    handed += tail.size();  // as written (the exit report's slot widens the head)
    if (tail.capacity() <= 2 * flush->chunk) {
      tail.clear();
    } else {  // the head's buffer: given back, and one of a chunk's size made
      std::string next;
      next.reserve(2 * flush->chunk);
      tail.swap(next);
    }
  };
  if (frame_table != nullptr) {
    tail += separator;
    separator = ',';
    tail += "\n  \"frame_table\": [";
    const bool kept = trace_events != nullptr && trace_events->frame;
    const size_t frames = kept ? trace_events->frames : frame_table->size();
    for (size_t i = 0; i < frames; ++i) {
      tail += i == 0 ? "\n    " : ",\n    ";
      if (kept) {
        trace_events->frame(i, &tail);
      } else {
        tail += Text((*frame_table)[i]);
      }
      maybe_flush();
    }
    tail += frames == 0 ? "]" : "\n  ]";
  }
  if (trace == nullptr) return;
  json events = trace->contains("events") ? std::move((*trace)["events"]) : json::array();
  trace->erase("events");
  tail += separator;
  tail += "\n  \"trace\": {";
  // A checkpoint's kept "sites" text, in the key order a document prints.
  const bool kept_sites = trace_events != nullptr && trace_events->trace_sites;
  bool sites_written = !kept_sites;
  const auto write_sites = [&] {
    tail += "\n    \"sites\": ";
    trace_events->trace_sites(&tail);
    tail += ',';
    sites_written = true;
  };
  for (const auto& [name, value] : trace->items()) {
    if (!sites_written && name > "sites") write_sites();
    tail += "\n    ";
    tail += Text(json(name));
    tail += ": ";
    tail += Text(value);
    tail += ',';
  }
  if (!sites_written) write_sites();
  tail += "\n    \"events\": [";
  const size_t count = trace_events != nullptr ? trace_events->count : events.size();
  const bool reuse = trace_events != nullptr && trace_events->reuse;
  for (size_t i = 0; i < count; ++i) {
    tail += i == 0 ? kTraceEventSeparator.substr(1) : kTraceEventSeparator;
    if (trace_events != nullptr) {
      if (const size_t n = reuse ? trace_events->reuse(i, handed + tail.size(), &tail) : 0) {
        i += n - 1;
      } else {
        trace_events->append(i, &tail);
      }
    } else {
      tail += Text(events[i]);
    }
    maybe_flush();
  }
  if (reuse) trace_events->reuse(count, handed + tail.size(), nullptr);
  tail += count == 0 ? "]\n  }" : "\n    ]\n  }";
}

}  // namespace

std::string DumpReport(json report, const TraceEventLines* trace_events, const TextFlush* flush) {
  if (!report.is_object()) return Text(report, 2) + "\n";
  json frame_table;
  json trace;
  if (auto it = report.find(key::kFrameTable); it != report.end() && it->is_array()) {
    frame_table = std::move(*it);
    report.erase(it);
  }
  if (auto it = report.find(key::kTrace); it != report.end() && it->is_object()) {
    trace = std::move(*it);
    report.erase(it);
  }
  json* const table_part = frame_table.is_array() ? &frame_table : nullptr;
  json* const trace_part = trace.is_object() ? &trace : nullptr;
  if (table_part == nullptr && trace_part == nullptr) {
    if (report.empty()) return "{}\n";
    std::string text = OneLineStacks(Text(report, 2));
    if (trace_events != nullptr && trace_events->head && !trace_events->head(&text)) return "";
    return text + "\n";
  }
  std::string text;
  if (!report.empty()) {
    text = OneLineStacks(Text(report, 2));  // ends with "\n}"
    if (trace_events != nullptr && trace_events->head && !trace_events->head(&text)) return "";
    text.resize(text.size() - 2);
  }
  report = json();  // the head is text now
  const size_t head = text.size();
  AppendTail(table_part, trace_part, trace_events, flush, head != 0, &text);
  text += "\n}\n";
  return text;
}

}  // namespace gpuwatch
