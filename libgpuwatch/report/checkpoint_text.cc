#include "libgpuwatch/report/checkpoint_text.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <optional>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "libgpuwatch/base/arena.h"
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
// with the stack on one line (Take indents it to the list's depth).
std::string RowText(const json& row) {
  return OneLineStacks(row.dump(2, ' ', false, json::error_handler_t::replace));
}

// A row's key: every field SiteRowJson prints but the site's location and
// stack, each number as a varint and each string and list with its length
// before it, so that two rows of one site have the same key exactly when
// they are equal in what they print. The location and the stack's indices
// are the site's own while the resolver lives (UseFor drops everything
// kept for another): ~30 bytes a row, not ~100 with the stack's 32
// indices.
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
  Put(s.frames.size(), key);
  for (const ReportFrame& f : s.frames) PutText(OneLine(FrameJson(f)), key);
  PutOptional(s.category, key);
  PutOptional(s.suppressed, key);
  Put(s.processes, key);
  for (const CountField<T>& f : T::Counts()) Put(s.*f.member, key);
}

void RowKey(const LeakSite& s, std::string* key) {
  PutSite(s, key);
  Put(s.kinds.size(), key);
  for (const auto& [kind, bytes] : s.kinds) {
    PutText(kind, key);
    Put(bytes, key);
  }
  PutText(s.phase, key);
}

void RowKey(const PeakSite& s, std::string* key) { PutSite(s, key); }

void RowKey(const AllocSite& s, std::string* key) {
  PutSite(s, key);
  Put(s.sizes.size(), key);
  for (const uint64_t n : s.sizes) Put(n, key);
}

// Appends `text` with `indent` after each of its line breaks.
void AppendIndented(std::string_view text, std::string_view indent, std::string* out) {
  size_t from = 0;
  for (size_t nl = text.find('\n'); nl != std::string::npos; nl = text.find('\n', from)) {
    out->append(text.substr(from, nl + 1 - from));
    out->append(indent);
    from = nl + 1;
  }
  out->append(text.substr(from));
}

// Takes `*list` into `*now` and makes `*made`: each row's key and text in
// one buffer (no allocation per row), the entries by site. A row's text is
// kept indented as its list prints it (`indent` after each line break), so
// that the splice copies it whole. A row whose key equals the one kept for
// its site keeps its text. `*twice`: a site listed twice with different
// rows.
template <typename T, typename PackedRows>
void Take(std::vector<T>* list, std::vector<T>* now, const PackedRows& kept,
          std::string_view indent, PackedRows* made, bool* twice) {
  *now = std::move(*list);
  list->clear();
  made->entries.clear();
  made->entries.reserve(now->size());
  std::string& bytes = made->made;
  bytes.clear();
  std::string key;
  for (const T& row : *now) {
    key.clear();
    RowKey(row, &key);
    auto& e = made->entries.emplace_back();
    e.site = row.site;
    e.at = bytes.size();
    e.key_size = static_cast<uint32_t>(key.size());
    bytes += key;
    const auto* k = kept.Find(row.site);
    if (k != nullptr && kept.bytes.view().substr(k->at, k->key_size) == key) {
      bytes += kept.bytes.view().substr(k->at + k->key_size, k->text_size);
    } else {
      AppendIndented(RowText(SiteRowJson(row)), indent, &bytes);
    }
    e.text_size = static_cast<uint32_t>(bytes.size() - e.at - e.key_size);
  }
  // By site, each once: a site listed twice keeps its first row (twice
  // when the rows differ: the list is then not spliced).
  auto& entries = made->entries;
  std::stable_sort(entries.begin(), entries.end(),
                   [](const auto& x, const auto& y) { return x.site < y.site; });
  const std::string_view view = bytes;
  const auto key_of = [view](const auto& e) { return view.substr(e.at, e.key_size); };
  size_t n = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (n != 0 && entries[n - 1].site == entries[i].site) {
      if (key_of(entries[n - 1]) != key_of(entries[i])) *twice = true;
      continue;
    }
    entries[n++] = entries[i];
  }
  entries.resize(n);
}

// `made` packed into a block of its own (only what its entries name).
template <typename PackedRows>
void Pack(const PackedRows& made, PackedRows* kept) {
  PackedRows packed;
  size_t size = 0;
  for (const auto& e : made.entries) size += e.key_size + e.text_size;
  packed.bytes = typename PackedRows::Block(size);
  packed.entries.reserve(made.entries.size());
  size_t at = 0;
  for (const auto& e : made.entries) {
    auto& p = packed.entries.emplace_back(e);
    p.at = at;
    std::memcpy(packed.bytes.data() + at, made.made.data() + e.at, e.key_size + e.text_size);
    at += e.key_size + e.text_size;
  }
  *kept = std::move(packed);
}

// Appends the rows of `now` in place of the marker found at or after `*at`
// in `head`, copying what lies before it; false when the marker is not
// there on a line of its own at `indent`.
template <typename T, typename PackedRows>
bool Splice(const std::string& head, const std::vector<T>& now, const PackedRows& made,
            std::string_view indent, size_t* at, std::string* out) {
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
    const auto* e = made.Find(now[i].site);
    if (e == nullptr) return false;
    out->append(made.made, e->at + e->key_size, e->text_size);
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
    Take(&leaks[&r - leaks_]->sites, &r.now, r.kept, kLeakIndent, &r.made, &twice_);
  }
  Take(&m->peak.sites, &peak_.now, peak_.kept, kPeakIndent, &peak_.made, &twice_);
  Take(&m->sites, &sites_.now, sites_.kept, kSitesIndent, &sites_.made, &twice_);
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
    r->made = {};
    decltype(r->now)().swap(r->now);
  };
  for (Rows<LeakSite>& r : leaks_) release(&r);
  release(&peak_);
  release(&sites_);
  rows_taken_ = false;
}

CheckpointText::PackedRows::Block::Block(size_t size) {
  if (size == 0) return;
  data_ = static_cast<char*>(MapZeroed(size));
  if (data_ == nullptr) throw std::bad_alloc();
  size_ = size;
}

CheckpointText::PackedRows::Block::~Block() { Unmap(data_, size_); }

CheckpointText::PackedRows::Block::Block(Block&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

CheckpointText::PackedRows::Block& CheckpointText::PackedRows::Block::operator=(
    Block&& other) noexcept {
  if (this != &other) {
    Unmap(data_, size_);
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
