#include "libgpuwatch/analysis/site_resolver.h"

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <functional>
#include <span>
#include <utility>

#include "libgpuwatch/stacks/stack_table.h"
#include "libgpuwatch/symbolize/mixed_stack.h"

namespace gpuwatch {

namespace {

// What a report says of a site besides its figures: the built-in category
// its stack falls in and the suppression rule that matched it.
SiteClass ClassifySite(std::span<const Frame* const> frames, const Suppressions* suppressions,
                       SuppressionKind kind, bool pytorch_per_tensor) {
  std::vector<FrameView> views;
  views.reserve(frames.size());
  for (const Frame* f : frames) views.push_back({f->function, f->file, f->module});
  SiteClass c;
  c.category = CategoryOf(views, pytorch_per_tensor);
  c.category_off = pytorch_per_tensor && c.category.empty() && !CategoryOf(views).empty();
  if (suppressions != nullptr) c.suppressed = suppressions->Match(kind, views);
  return c;
}

}  // namespace

SiteResolver::SiteResolver(const StackTable* stacks, Symbolizer* symbolizer,
                           const AllocFunctions* alloc_fns)
    : stacks_(stacks), alloc_fns_(alloc_fns), shared_symbolizer_(symbolizer) {
  static std::atomic<uint64_t> made{0};
  serial_ = made.fetch_add(1, std::memory_order_relaxed) + 1;
}
SiteResolver::~SiteResolver() = default;

std::span<const Frame* const> SiteResolver::FrameRefsOf(uint32_t stack_id) {
  if (stack_id < ref_at_.size() && ref_at_[stack_id].begin != kNoRefs) {
    const RefSlot& slot = ref_at_[stack_id];
    return {refs_.data() + slot.begin, slot.size};
  }
  const size_t begin = refs_.size();
  bool merged = false;
  if (stacks_ != nullptr && stack_id != 0) {
    const std::span<const uintptr_t> pcs = stacks_->Get(stack_id);
    if (!pcs.empty()) {
      Symbolizer* symbolizer = shared_symbolizer_;
      if (symbolizer == nullptr) {
        if (own_symbolizer_ == nullptr) own_symbolizer_ = std::make_unique<Symbolizer>();
        symbolizer = own_symbolizer_.get();
      }
      if (!SymbolizeNativeStackInPlace(symbolizer, pcs, &refs_)) {
        // Python frames merged in: frames of this stack's own.
        std::vector<Frame> frames;
        SymbolizeMixedStack(symbolizer, stacks_->python_frames(), pcs, &frames);
        for (Frame& f : frames) refs_.push_back(&merged_frames_.emplace_back(std::move(f)));
        merged = true;
      }
      // The user's allocation helpers are not the site: their callers are
      // (TrimTop: never the last frame).
      if (alloc_fns_ != nullptr && !alloc_fns_->empty()) {
        TrimTopRefs(&refs_, begin,
                    [this](const Frame& f) { return alloc_fns_->Matches(f.function); });
      }
    }
  }
  if (stack_id >= ref_at_.size()) ref_at_.resize(size_t{stack_id} + 1);
  RefSlot& slot = ref_at_[stack_id];
  slot.begin = static_cast<uint32_t>(begin);
  slot.size = static_cast<uint32_t>(refs_.size() - begin);
  slot.merged = merged ? 1 : 0;
  ++refs_held_;
  return {refs_.data() + begin, slot.size};
}

const std::vector<Frame>& SiteResolver::FramesOf(uint32_t stack_id) {
  auto it = cache_.find(stack_id);
  if (it != cache_.end()) return it->second;
  std::vector<Frame> frames;
  for (const Frame* f : FrameRefsOf(stack_id)) frames.push_back(*f);
  return cache_.emplace(stack_id, std::move(frames)).first->second;
}

const std::vector<uint32_t>& SiteResolver::StackOf(uint32_t stack_id) {
  FrameTable& table = *table_;
  auto it = table.stacks.find(stack_id);
  if (it != table.stacks.end()) return it->second;
  const std::span<const Frame* const> frames = FrameRefsOf(stack_id);
  // A kept table keeps what it points to: the symbolizer's frames as they
  // are, a merged frame as a copy (merged frames go with the report).
  const bool copy = table_ == &kept_table_ && ref_at_[stack_id].merged != 0;
  std::vector<uint32_t> indices;
  std::string key;
  for (const Frame* f : frames) {
    key.assign(f->module);
    key += '\0';
    key += f->function;
    key += '\0';
    key += f->file;
    key += '\0';
    key += std::to_string(f->line);
    key += f->inlined ? 'i' : 'o';  // the same line inlined or not: two frames
    const auto [at, added] =
        table.index.try_emplace(key, static_cast<uint32_t>(table.frames.size()));
    if (added) table.frames.push_back(copy ? &table.owned.emplace_back(*f) : f);
    indices.push_back(at->second);
  }
  return table.stacks.emplace(stack_id, std::move(indices)).first->second;
}

void SiteResolver::ReleaseFrames() {
  ClearFrameTable();
  cache_.clear();
  // Freed, not kept for the next report (clear() would keep their blocks).
  std::vector<const Frame*>().swap(refs_);
  std::vector<RefSlot>().swap(ref_at_);
  std::deque<Frame>().swap(merged_frames_);
  refs_held_ = 0;
}

void SiteResolver::ClearFrameTable() {
  report_table_.frames.clear();
  report_table_.index.clear();
  report_table_.stacks.clear();
}

std::string SiteResolver::KeyOf(uint32_t stack_id) {
  // Keyed by what the user reads (function, file, line), not by pc: the
  // compiler may unroll one source-level call into several call sites.
  std::string key;
  for (const Frame* f : FrameRefsOf(stack_id)) {
    key += f->module;
    key += '\0';
    key += f->function;
    key += '\0';
    if (f->line > 0) {
      key += f->file;
      key += ':' + std::to_string(f->line);
    } else {
      key += std::to_string(f->offset);
    }
    key += '\n';
  }
  return key;
}

void SiteResolver::Recanonicalize(uint32_t from, uint32_t to) {
  ++recanonicalized_;
  for (uint32_t& c : canonical_flat_) {
    if (c == from) c = to;
  }
  for (auto& [id, c] : canonical_) {
    if (c == from) c = to;
  }
  for (auto& [key, c] : collided_) {
    if (c == from) c = to;
  }
}

uint32_t SiteResolver::ResolveCanonical(uint32_t stack_id) {
  if (auto it = canonical_.find(stack_id); it != canonical_.end()) return it->second;
  uint32_t canonical = stack_id;
  if (std::string key = KeyOf(stack_id); !key.empty()) {
    const uint64_t hash = std::hash<std::string>()(key);
    const auto [at, added] = by_hash_.try_emplace(hash, stack_id);
    uint32_t* holder = &at->second;
    if (!added && KeyOf(*holder) != key) {  // another stack with the same hash
      holder = &collided_.try_emplace(std::move(key), stack_id).first->second;
    }
    if (stack_id < *holder) {  // resolved after larger ids that read the same
      const uint32_t from = *holder;
      *holder = stack_id;
      if (from != stack_id) Recanonicalize(from, stack_id);
    }
    canonical = *holder;
  }
  if (stack_id < canonical_flat_.size()) {
    canonical_flat_[stack_id] = canonical;
  } else {
    canonical_.emplace(stack_id, canonical);
  }
  return canonical;
}

void SiteResolver::Prepare(std::vector<uint32_t> ids) {
  // Ids an earlier report of this resolver resolved are answered from the
  // flat table and resolving them again changes nothing: only the others are
  // sorted (a checkpoint's ~30,000 ids, nearly all known, sorted whole cost
  // ~10 M instructions).
  std::erase_if(ids, [this](uint32_t id) {
    return id < canonical_flat_.size() && canonical_flat_[id] != kUnresolved;
  });
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  if (!ids.empty() && ids.back() >= canonical_flat_.size()) {
    canonical_flat_.resize(size_t{ids.back()} + 1, kUnresolved);
  }
  for (const uint32_t id : ids) Canonical(id);
}

const SiteClass& SiteResolver::ClassOf(uint32_t stack_id, const Suppressions* suppressions,
                                       SuppressionKind kind) {
  const uint64_t key = (uint64_t{static_cast<uint8_t>(kind)} << 32) | stack_id;
  if (auto it = classes_.find(key); it != classes_.end()) return it->second;
  return classes_
      .emplace(key, ClassifySite(FrameRefsOf(stack_id), suppressions, kind, pytorch_per_tensor_))
      .first->second;
}

namespace {

// "a::B" of "a::B::f(int) const": a function's name up to its last "::",
// parameters left out; "" for a function outside any class or namespace.
std::string_view ScopeOf(std::string_view function) {
  const std::string_view name = FunctionNameOf(function);
  const size_t colons = name.rfind("::");
  return colons == std::string_view::npos ? std::string_view() : name.substr(0, colons);
}

}  // namespace

std::string SiteResolver::CallerOf(uint32_t stack_id) {
  const std::span<const Frame* const> frames = FrameRefsOf(stack_id);
  const size_t site = SiteFrameIndex(frames);
  if (site == frames.size()) return "";
  const std::string_view scope = ScopeOf(frames[site]->function);
  for (const Frame* f : frames.subspan(site + 1)) {
    if (f->line <= 0 || f->file.empty()) continue;
    if (scope.empty() || ScopeOf(f->function) != scope) {
      return std::string(Basename(f->file)) + ":" + std::to_string(f->line);
    }
  }
  return "";
}

std::string SiteResolver::LocationOf(uint32_t stack_id) {
  if (stack_id < locations_.size() && !locations_[stack_id].empty()) return locations_[stack_id];
  std::string location = LocationOfFrames(FrameRefsOf(stack_id));
  if (stack_id >= locations_.size()) locations_.resize(size_t{stack_id} + 1);
  locations_[stack_id] = location;
  return location;
}

std::string SiteResolver::LocationOfFrames(std::span<const Frame* const> frames) {
  if (const size_t i = SiteFrameIndex(frames); i < frames.size()) {
    return std::string(Basename(frames[i]->file)) + ":" + std::to_string(frames[i]->line);
  }
  if (!frames.empty()) {
    const Frame& f = *frames.front();
    if (!f.function.empty()) {
      return f.function + " (" + std::string(Basename(f.module)) + ")";
    }
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%s+0x%" PRIxPTR, std::string(Basename(f.module)).c_str(),
                  f.offset);
    return buf;
  }
  return "<no stack>";
}

}  // namespace gpuwatch
