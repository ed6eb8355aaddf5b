// Stack ids as a report shows them: symbolized frames, sites merged when
// they read the same, the report's frame table, and each site's category and
// suppression. Report time only, never inside a CUDA callback.
#ifndef GPUWATCH_LIBGPUWATCH_ANALYSIS_SITE_RESOLVER_H_
#define GPUWATCH_LIBGPUWATCH_ANALYSIS_SITE_RESOLVER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "libgpuwatch/analysis/alloc_functions.h"
#include "libgpuwatch/analysis/suppressions.h"
#include "libgpuwatch/symbolize/symbolizer.h"

namespace gpuwatch {

class StackTable;

// A site's built-in category (memory a library keeps on purpose) and the
// suppression rule that matched it.
struct SiteClass {
  std::string_view category;  // "" when none
  const Suppression* suppressed = nullptr;
  // A category the site's frames fall in that is off in this process
  // (PyTorch's allocator in a per-tensor mode); reports then write an
  // explicit empty category, so that tools do not put the site back in it.
  bool category_off = false;
};

// Turns stack ids into frames for a report: symbolized, with gpuwatch's,
// CUPTI's, the driver's and cudart's frames trimmed from the top, and then the
// user's allocation helpers (AllocFunctions), cached per id. Every output of a
// report (sites, phases, the live state, collapsed stacks) reads its frames
// here, so they name the same site. Report time only; not thread-safe.
//
// One resolver may serve report after report (ReleaseFrames() after each):
// what it keeps is which ids read the same and each id's location (a few
// dozen bytes per id, no frames), so that a report of a process whose sites
// did not change symbolizes only the sites whose stacks it lists (a
// checkpoint's trace names 10,000 sites by location: stop 46 in
// docs/BENCHMARKS.md), and a new site costs its own symbolization.
class SiteResolver {
 public:
  // `stacks` may be null (no stacks captured): every site then has no frames.
  // `symbolizer`, when given, is used instead of a Symbolizer of the
  // resolver's own, so that what it resolved serves the next report too.
  // `alloc_fns` (may be null), kept by the caller: the helpers trimmed.
  explicit SiteResolver(const StackTable* stacks, Symbolizer* symbolizer = nullptr,
                        const AllocFunctions* alloc_fns = nullptr);
  ~SiteResolver();
  SiteResolver(const SiteResolver&) = delete;
  SiteResolver& operator=(const SiteResolver&) = delete;

  // Drops what one report needed (frames, the frame table) and keeps the
  // ids' canonical ids and classes, for the next report with the same
  // symbolizer.
  void ReleaseFrames();
  // Stacks whose frames are held now (for tests).
  size_t frames_cached() const { return refs_held_; }

  // The site's frames, innermost first, until ReleaseFrames(): pointers into
  // the symbolizer's cache (a stack with Python frames: into this resolver's
  // store of merged frames). What the resolver itself reads: no frame is
  // copied, so a report's frames cost it two large blocks (the pointers and
  // an index by id), not kilobytes per site amid what it keeps.
  std::span<const Frame* const> FrameRefsOf(uint32_t stack_id);
  // The same frames, copied (the reports' callers that read a few sites).
  const std::vector<Frame>& FramesOf(uint32_t stack_id);
  // The site's frames as indices into frame_table(), innermost first: each
  // distinct frame is listed once per report however many stacks hold it.
  const std::vector<uint32_t>& StackOf(uint32_t stack_id);
  // The frames StackOf() has indexed since the last ClearFrameTable(); they
  // point into this resolver's cache.
  const std::vector<const Frame*>& frame_table() const { return table_->frames; }
  // Clears the frame table of the report being made (not a kept one).
  void ClearFrameTable();
  // On: StackOf() indexes into a frame table kept from one call to the next
  // (checkpoints): a frame keeps the index it got first, frames are only
  // appended, and the table survives ReleaseFrames() (it holds copies of its
  // frames). Off: the table of one report, cleared by ClearFrameTable().
  // docs/report-format.md, frame_table.
  void KeepFrameTable(bool on) { table_ = on ? &kept_table_ : &report_table_; }
  // Tells resolvers apart (a number no other resolver of the process has):
  // what a caller keeps for one resolver's kept frame table, the text of
  // its rows, is not another's.
  uint64_t serial() const { return serial_; }
  // How many times a smaller id resolved later became the canonical id of
  // ids resolved before (Canonical): what was written of their canonical ids
  // before may read otherwise now (a checkpoint's kept trace lines).
  uint64_t recanonicalized() const { return recanonicalized_; }
  // Stacks that read the same after trimming are one site to the user: they
  // may differ in the trimmed frames (the runtime takes another internal path
  // on its first call) or in pcs that map to the same lines (an unrolled
  // loop calls from two addresses). Returns the smallest id resolved so far
  // with the same trimmed stack: ids resolved in increasing order (Prepare)
  // keep their answer, and a smaller id resolved later becomes the answer of
  // every id that reads as it does.
  uint32_t Canonical(uint32_t stack_id) {
    // Inline: a report asks once per live allocation, and the ids Prepare
    // saw are answered from the flat table.
    if (stack_id < canonical_flat_.size() && canonical_flat_[stack_id] != kUnresolved) {
      return canonical_flat_[stack_id];
    }
    return ResolveCanonical(stack_id);
  }
  // Resolves `ids` in increasing order so that Canonical() is deterministic.
  void Prepare(std::vector<uint32_t> ids);
  // "file:line" of the first frame that has a line, else "function (module)",
  // else "<no stack>". Kept per id across ReleaseFrames(): the frames it
  // reads do not change while the symbolizer is the same.
  std::string LocationOf(uint32_t stack_id);
  // "file:line" of the code that called the site's function from outside:
  // the first frame after the site's line (LocationOf) that has a line and
  // lies outside that function's class or namespace (any frame after it
  // when the function has none). "" when no frame does. For sites inside an
  // allocator (a pool's region registration), where the user's line is.
  std::string CallerOf(uint32_t stack_id);
  // The category and the `kind` rule of `suppressions` (may be null) that
  // match the site's frames; computed once per site and kind. Every call on
  // one resolver must pass the same `suppressions`.
  const SiteClass& ClassOf(uint32_t stack_id, const Suppressions* suppressions,
                           SuppressionKind kind);
  // PytorchAllocatesPerTensor() of the process: its allocator's frames are
  // no category. Set before the first ClassOf.
  void set_pytorch_per_tensor(bool on) {
    if (on != pytorch_per_tensor_) classes_.clear();
    pytorch_per_tensor_ = on;
  }

 private:
  static constexpr uint32_t kUnresolved = UINT32_MAX;

  uint32_t ResolveCanonical(uint32_t stack_id);  // Canonical() beyond the flat table
  static std::string LocationOfFrames(std::span<const Frame* const> frames);
  // What the user reads of a stack (function, file, line per frame); "" when
  // it has no frames.
  std::string KeyOf(uint32_t stack_id);
  // Every id whose canonical id is `from` now answers `to` (a smaller id
  // that reads the same, resolved after them).
  void Recanonicalize(uint32_t from, uint32_t to);

  const StackTable* stacks_;
  const AllocFunctions* alloc_fns_;
  bool pytorch_per_tensor_ = false;
  Symbolizer* shared_symbolizer_;
  std::unique_ptr<Symbolizer> own_symbolizer_;
  // FrameRefsOf(): this report's pointers, stack after stack, and each id's
  // place among them (begin, size; kNoRefs: not resolved in this report).
  // Released whole by ReleaseFrames().
  struct RefSlot {
    uint32_t begin = kNoRefs;
    uint32_t size : 31 = 0;
    uint32_t merged : 1 = 0;  // into merged_frames_, not the symbolizer's cache
  };
  static constexpr uint32_t kNoRefs = UINT32_MAX;
  std::vector<const Frame*> refs_;
  std::vector<RefSlot> ref_at_;
  size_t refs_held_ = 0;
  // The frames of this report's stacks with Python frames (merged per
  // stack, so not in the symbolizer's cache).
  std::deque<Frame> merged_frames_;
  // FramesOf()'s copies.
  std::unordered_map<uint32_t, std::vector<Frame>> cache_;
  // id -> canonical id: a flat table over the ids Prepare saw (reports look
  // up one id per live allocation), a map for any other.
  std::vector<uint32_t> canonical_flat_;
  std::unordered_map<uint32_t, uint32_t> canonical_;
  std::unordered_map<uint64_t, SiteClass> classes_;  // (kind, id) -> class
  // LocationOf() by id, "" when not known yet (a location never is "").
  std::vector<std::string> locations_;
  // The hash of KeyOf() -> its canonical id; a key whose hash another key
  // holds is kept whole in collided_ (checked against the holder's key).
  std::unordered_map<uint64_t, uint32_t> by_hash_;
  std::unordered_map<std::string, uint32_t> collided_;
  // A frame table: its frames, an index per distinct frame, and each stack
  // id's indices. A kept table points into the symbolizer's cache, which
  // lives as long as the resolver, and owns copies of merged frames
  // (`owned`): those are released after each report.
  struct FrameTable {
    std::vector<const Frame*> frames;
    std::unordered_map<std::string, uint32_t> index;
    std::unordered_map<uint32_t, std::vector<uint32_t>> stacks;
    std::deque<Frame> owned;
  };
  FrameTable report_table_;
  FrameTable kept_table_;
  FrameTable* table_ = &report_table_;
  uint64_t serial_;
  uint64_t recanonicalized_ = 0;
};

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_ANALYSIS_SITE_RESOLVER_H_
