#include "libgpuwatch/report/checkpoint_text.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <optional>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "libgpuwatch/report/report_model.h"
#include "libgpuwatch/report/report_schema.h"

namespace gpuwatch {

namespace {

using nlohmann::json;

// As DumpReport prints a value on one line (not UTF-8: U+FFFD).
std::string OneLine(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

// What DumpReport prints of a discarded value, a list's marker.
constexpr std::string_view kMarker = "<discarded>";

// Where each list's rows start: leaks.*.sites[], peak.sites[], sites[].
constexpr std::string_view kLeakIndent = "        ";
constexpr std::string_view kPeakIndent = "      ";
constexpr std::string_view kSitesIndent = "    ";

// A row as DumpReport prints it inside its list at depth 0: json::dump(2)
// with the stack on one line (Splice indents it to the list's depth).
std::string RowText(const json& row) {
  return OneLineStacks(row.dump(2, ' ', false, json::error_handler_t::replace));
}

// A row's key: every field SiteRowJson prints, each number as a varint and
// each string and list with its length before it, so that two rows have the
// same key exactly when they are equal in what they print. ~100 bytes a
// row (a stack of 32 frames' indices, most under 16,384: 2 bytes each).
void Put(uint64_t v, std::string* key) {
  while (v >= 0x80) {
    *key += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  *key += static_cast<char>(v);
}

void PutText(std::string_view text, std::string* key) {
  Put(text.size(), key);
  key->append(text);
}

void PutOptional(const std::optional<std::string>& text, std::string* key) {
  Put(text.has_value() ? 1 : 0, key);
  if (text.has_value()) PutText(*text, key);
}

template <typename T>
void PutSite(const T& s, std::string* key) {
  Put(s.site, key);
  PutText(s.location, key);
  Put(s.stack.size(), key);
  for (const uint32_t i : s.stack) Put(i, key);
  Put(s.frames.size(), key);
  for (const ReportFrame& f : s.frames) PutText(OneLine(FrameJson(f)), key);
  PutOptional(s.category, key);
  PutOptional(s.suppressed, key);
  Put(s.processes, key);
  for (const CountField<T>& f : T::Counts()) Put(s.*f.member, key);
}

std::string RowKey(const LeakSite& s) {
  std::string key;
  PutSite(s, &key);
  Put(s.kinds.size(), &key);
  for (const auto& [kind, bytes] : s.kinds) {
    PutText(kind, &key);
    Put(bytes, &key);
  }
  PutText(s.phase, &key);
  return key;
}

std::string RowKey(const PeakSite& s) {
  std::string key;
  PutSite(s, &key);
  return key;
}

std::string RowKey(const AllocSite& s) {
  std::string key;
  PutSite(s, &key);
  Put(s.sizes.size(), &key);
  for (const uint64_t n : s.sizes) Put(n, &key);
  return key;
}

template <typename T, typename KeptRow, typename PackedRows>
void Take(std::vector<T>* list, std::vector<T>* now, const PackedRows& kept,
          std::unordered_map<uint64_t, KeptRow>* made, bool* twice) {
  *now = std::move(*list);
  list->clear();
  made->clear();
  made->reserve(now->size());
  for (const T& row : *now) {
    std::string key = RowKey(row);
    if (const auto at = made->find(row.site); at != made->end()) {
      if (at->second.key != key) *twice = true;
      continue;
    }
    const auto* e = kept.Find(row.site);
    if (e != nullptr && kept.bytes.view().substr(e->at, e->key_size) == key) {
      made->emplace(row.site, KeptRow{std::move(key), std::string(kept.bytes.view().substr(
                                                          e->at + e->key_size, e->text_size))});
    } else {
      made->emplace(row.site, KeptRow{std::move(key), RowText(SiteRowJson(row))});
    }
  }
}

// `made` packed into one block, by site.
template <typename KeptRow, typename PackedRows>
void Pack(const std::unordered_map<uint64_t, KeptRow>& made, PackedRows* kept) {
  PackedRows packed;
  size_t size = 0;
  for (const auto& [site, row] : made) size += row.key.size() + row.text.size();
  packed.bytes = typename PackedRows::Block(size);
  packed.entries.reserve(made.size());
  size_t at = 0;
  for (const auto& [site, row] : made) {
    auto& e = packed.entries.emplace_back();
    e.site = site;
    e.at = at;
    e.key_size = static_cast<uint32_t>(row.key.size());
    e.text_size = static_cast<uint32_t>(row.text.size());
    std::memcpy(packed.bytes.data() + at, row.key.data(), row.key.size());
    at += row.key.size();
    std::memcpy(packed.bytes.data() + at, row.text.data(), row.text.size());
    at += row.text.size();
  }
  std::sort(packed.entries.begin(), packed.entries.end(),
            [](const auto& a, const auto& b) { return a.site < b.site; });
  *kept = std::move(packed);
}

// Appends `text` with `indent` after each of its line breaks.
void AppendIndented(const std::string& text, std::string_view indent, std::string* out) {
  size_t from = 0;
  for (size_t nl = text.find('\n'); nl != std::string::npos; nl = text.find('\n', from)) {
    out->append(text, from, nl + 1 - from);
    out->append(indent);
    from = nl + 1;
  }
  out->append(text, from, std::string::npos);
}

// Appends the rows of `now` in place of the marker found at or after `*at`
// in `head`, copying what lies before it; false when the marker is not
// there on a line of its own at `indent`.
template <typename T, typename KeptRow>
bool Splice(const std::string& head, const std::vector<T>& now,
            const std::unordered_map<uint64_t, KeptRow>& kept, std::string_view indent, size_t* at,
            std::string* out) {
  if (now.empty()) return true;
  const size_t marker = head.find(kMarker, *at);
  if (marker == std::string::npos || marker < indent.size() + 1 ||
      head.compare(marker - indent.size() - 1, indent.size() + 1, "\n" + std::string(indent)) !=
          0 ||
      head.compare(marker + kMarker.size(), 1, "\n") != 0) {
    return false;
  }
  out->append(head, *at, marker - *at);
  for (size_t i = 0; i < now.size(); ++i) {
    if (i != 0) {
      *out += ",\n";
      *out += indent;
    }
    const auto it = kept.find(now[i].site);
    if (it == kept.end()) return false;
    AppendIndented(it->second.text, indent, out);
  }
  *at = marker + kMarker.size();
  return true;
}

}  // namespace

void CheckpointText::UseFor(uint64_t resolver) {
  if (resolver == resolver_) return;
  resolver_ = resolver;
  frames_.clear();
  trace_sites_.clear();
  for (Rows<LeakSite>& r : leaks_) r = {};
  peak_ = {};
  sites_ = {};
}

void CheckpointText::TakeRows(ReportModel* m) {
  LeakList* leaks[3] = {&m->leaks_device, &m->leaks_host, &m->leaks_ipc_imported};
  twice_ = false;
  for (Rows<LeakSite>& r : leaks_) {
    Take(&leaks[&r - leaks_]->sites, &r.now, r.kept, &r.made, &twice_);
  }
  Take(&m->peak.sites, &peak_.now, peak_.kept, &peak_.made, &twice_);
  Take(&m->sites, &sites_.now, sites_.kept, &sites_.made, &twice_);
  rows_taken_ = true;
}

void CheckpointText::MarkRows(json* doc) const {
  const json marker = json::array({json(json::value_t::discarded)});
  const char* which[3] = {report_key::kDevice, report_key::kHost, report_key::kIpcImported};
  json& leaks = (*doc)[report_key::kLeaks];
  for (int i = 0; i < 3; ++i) {
    if (!leaks_[i].now.empty()) leaks[which[i]][report_key::kSites] = marker;
  }
  if (!peak_.now.empty()) (*doc)[report_key::kPeak][report_key::kSites] = marker;
  if (!sites_.now.empty()) (*doc)[report_key::kSites] = marker;
}

bool CheckpointText::SpliceRows(std::string* head) const {
  // The markers in the document's key order: leaks (device, host,
  // ipc_imported), peak, sites.
  if (twice_) return false;
  std::string out;
  size_t at = 0;
  for (const Rows<LeakSite>& r : leaks_) {
    if (!Splice(*head, r.now, r.made, kLeakIndent, &at, &out)) return false;
  }
  if (!Splice(*head, peak_.now, peak_.made, kPeakIndent, &at, &out) ||
      !Splice(*head, sites_.now, sites_.made, kSitesIndent, &at, &out) ||
      head->find(kMarker, at) != std::string::npos) {
    return false;
  }
  out.append(*head, at, std::string::npos);
  head->swap(out);
  return true;
}

void CheckpointText::GiveRowsBack(ReportModel* m) {
  LeakList* leaks[3] = {&m->leaks_device, &m->leaks_host, &m->leaks_ipc_imported};
  for (int i = 0; i < 3; ++i) leaks[i]->sites = leaks_[i].now;
  m->peak.sites = peak_.now;
  m->sites = sites_.now;
  rows_taken_ = false;
}

void CheckpointText::AddFrames(const std::vector<const Frame*>& table) {
  for (size_t i = frames_.size(); i < table.size(); ++i) {
    frames_.push_back(OneLine(FrameJson(ReportFrameOf(*table[i]))));
  }
}

void CheckpointText::AddTraceSites(const std::vector<ReportTraceSite>& sites) {
  for (const ReportTraceSite& s : sites) {
    if (s.site >= trace_sites_.size()) trace_sites_.resize(size_t{s.site} + 1);
    std::string& row = trace_sites_[s.site];
    if (row.empty()) {
      row = OneLine({{report_key::kSite, s.site}, {report_key::kLocation, s.location}});
    }
  }
}

void CheckpointText::AppendTraceSites(const std::vector<ReportTraceSite>& sites,
                                      std::string* out) const {
  *out += '[';
  for (size_t i = 0; i < sites.size(); ++i) {
    if (i != 0) *out += ',';
    *out += trace_sites_[sites[i].site];
  }
  *out += ']';
}

void CheckpointText::ReleaseRows() {
  // What is kept is packed now, after the report's own memory was freed;
  // the rows as listed and the per-row strings are dropped.
  const auto release = [](auto* r) {
    Pack(r->made, &r->kept);
    decltype(r->made)().swap(r->made);
    decltype(r->now)().swap(r->now);
  };
  for (Rows<LeakSite>& r : leaks_) release(&r);
  release(&peak_);
  release(&sites_);
  rows_taken_ = false;
}

CheckpointText::PackedRows::Block::Block(size_t size) {
  if (size == 0) return;
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  data_ = static_cast<char*>(p);
  size_ = size;
}

CheckpointText::PackedRows::Block::~Block() {
  if (data_ != nullptr) munmap(data_, size_);
}

CheckpointText::PackedRows::Block::Block(Block&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

CheckpointText::PackedRows::Block& CheckpointText::PackedRows::Block::operator=(
    Block&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) munmap(data_, size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

const CheckpointText::PackedRows::Entry* CheckpointText::PackedRows::Find(uint64_t site) const {
  const auto it = std::lower_bound(entries.begin(), entries.end(), site,
                                   [](const Entry& e, uint64_t s) { return e.site < s; });
  return it != entries.end() && it->site == site ? &*it : nullptr;
}

size_t CheckpointText::bytes() const {
  const auto text = [](const std::string& s) { return s.capacity() > 15 ? s.capacity() + 1 : 0; };
  size_t n = (frames_.capacity() + trace_sites_.capacity()) * sizeof(std::string);
  for (const std::string& s : frames_) n += text(s);
  for (const std::string& s : trace_sites_) n += text(s);
  const auto rows = [&text](const auto& r) {
    return r.kept.entries.capacity() * sizeof(PackedRows::Entry) + r.kept.bytes.size();
  };
  for (const Rows<LeakSite>& r : leaks_) n += rows(r);
  return n + rows(peak_) + rows(sites_);
}

}  // namespace gpuwatch
