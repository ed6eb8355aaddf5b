#include "libgpuwatch/stacks/cfi_unwind.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstring>

#include "libgpuwatch/base/thread_block.h"
#include "libgpuwatch/stacks/stack_bounds.h"

namespace gpuwatch {

namespace internal {
namespace {

// The loader's unload count when the table was last checked against it.
constinit std::atomic<unsigned long long> g_subs_seen{0};

CfiRule ComputeAndNoteUnloads(uintptr_t pc) {
  unsigned long long unloads = 0;
  const CfiRule rule = ComputeCfiRule(pc, &unloads);
  if (g_subs_seen.exchange(unloads, std::memory_order_relaxed) != unloads) FlushCfiRules();
  return rule;
}

// ---- The table of rules, by pc ----------------------------------------------
//
// A rule packed in one word: flags in bits 0-7, the return address's offset
// from the CFA in bits 8-19 and rbp's in 20-31 (signed), the CFA's offset in
// bits 32-63. kComputed keeps every stored rule non-zero (0: being written).
constexpr uint64_t kComputed = 1;
constexpr uint64_t kOk = 2;
constexpr uint64_t kOutermost = 4;
constexpr uint64_t kCfaFromRbp = 8;
constexpr uint64_t kRbpSaved = 16;

uint64_t Pack(const CfiRule& rule) {
  uint64_t packed = kComputed;
  if (!rule.ok) return packed;
  packed |= kOk | (rule.outermost ? kOutermost : 0) | (rule.cfa_from_rbp ? kCfaFromRbp : 0) |
            (rule.rbp_saved ? kRbpSaved : 0);
  packed |= (static_cast<uint64_t>(rule.ra_offset) & 0xfff) << 8;
  packed |= (static_cast<uint64_t>(rule.rbp_offset) & 0xfff) << 20;
  packed |= static_cast<uint64_t>(static_cast<uint32_t>(rule.cfa_offset)) << 32;
  return packed;
}

inline int64_t RaOffset(uint64_t packed) { return static_cast<int64_t>(packed << 44) >> 52; }
inline int64_t RbpOffset(uint64_t packed) { return static_cast<int64_t>(packed << 32) >> 52; }
inline int64_t CfaOffset(uint64_t packed) { return static_cast<int32_t>(packed >> 32); }

// 32,768 slots of 16 bytes (512 KiB of zero pages until used): a process's
// distinct return addresses, which are a few thousand even in PyTorch.
constexpr int kSlotBits = 15;
constexpr uint64_t kSlots = uint64_t{1} << kSlotBits;
constexpr uint64_t kMaxProbe = 16;
struct Slot {
  std::atomic<uintptr_t> pc{0};
  std::atomic<uint64_t> rule{0};
};
constinit Slot g_slots[kSlots];
constinit std::atomic<int> g_cached{0};
// Moves on each flush, so that threads drop their last walk (see Record).
constinit std::atomic<uint64_t> g_generation{1};

// Tests: called after a rule is computed, before it enters the table.
constinit std::atomic<void (*)(uintptr_t)> g_rule_computed_hook{nullptr};

inline uint64_t SlotOf(uintptr_t pc) { return (pc * 0x9e3779b97f4a7c15ULL) >> (64 - kSlotBits); }

// The packed rule the table holds for `pc`, or 0.
inline uint64_t CachedRule(uintptr_t pc) {
  const uint64_t home = SlotOf(pc);
  for (uint64_t i = 0; i < kMaxProbe; ++i) {
    const Slot& slot = g_slots[(home + i) & (kSlots - 1)];
    const uintptr_t key = slot.pc.load(std::memory_order_acquire);
    if (key == 0) return 0;
    if (key != pc) continue;
    const uint64_t rule = slot.rule.load(std::memory_order_acquire);
    // 0: another thread is still computing it. A flush may have reused the
    // slot for another pc between the two loads: look again.
    return slot.pc.load(std::memory_order_relaxed) == pc ? rule : 0;
  }
  return 0;
}

// RuleFor for a pc the table does not hold: computes its rule and adds it.
// Out of line, so that a walk's lookups that hit (nearly all) are inlined.
__attribute__((noinline)) uint64_t ComputeRuleFor(uintptr_t pc) {
  const uint64_t home = SlotOf(pc);
  // A flush (a module was unloaded) while the rule was being computed may
  // have come after the computation read the unloaded module's tables, or
  // cleared this slot just before it is taken: such a rule must not stay in
  // the table. A flush moves the generation before it clears anything, so a
  // generation unchanged since before the computation, read after the entry
  // is made, says that none did.
  const uint64_t generation = g_generation.load(std::memory_order_acquire);
  const uint64_t rule = Pack(ComputeAndNoteUnloads(pc));
  if (auto* hook = g_rule_computed_hook.load(std::memory_order_relaxed)) hook(pc);
  for (uint64_t i = 0; i < kMaxProbe; ++i) {
    Slot& slot = g_slots[(home + i) & (kSlots - 1)];
    uintptr_t key = slot.pc.load(std::memory_order_acquire);
    if (key == 0 && slot.pc.compare_exchange_strong(key, pc, std::memory_order_acq_rel)) {
      slot.rule.store(rule, std::memory_order_release);
      if (g_generation.load(std::memory_order_acquire) != generation) {
        slot.rule.store(0, std::memory_order_relaxed);  // taken back: a miss, not a stale rule
        uintptr_t mine = pc;
        slot.pc.compare_exchange_strong(mine, 0, std::memory_order_acq_rel);
        break;
      }
      g_cached.fetch_add(1, std::memory_order_relaxed);
      break;
    }
    if (key == pc) break;  // another thread added it meanwhile
  }
  return rule;
}

// The packed rule for `pc`: from the table, or computed and added to it.
inline uint64_t RuleFor(uintptr_t pc) {
  const uint64_t rule = CachedRule(pc);
  return rule != 0 ? rule : ComputeRuleFor(pc);
}

// The rule of a frame whose ip is `ip`: a caller's ip is a return address,
// and the call before it has the frame's row.
inline uint64_t FrameRule(uintptr_t ip, bool innermost) { return RuleFor(innermost ? ip : ip - 1); }

// A word of the stack, read without sanitizer checks: these are return
// addresses and saved registers, which ASan does not poison, but the walker
// must not be reported for reading the frames of other functions.
__attribute__((no_sanitize("address", "hwaddress", "thread"))) inline uintptr_t LoadWord(
    uintptr_t at) {
  uintptr_t value = 0;
  __builtin_memcpy(&value, reinterpret_cast<const void*>(at),  // NOLINT(performance-no-int-to-ptr)
                   sizeof(value));
  return value;
}

// One frame's registers, as the walk recovers them. (No initialisers: the
// walk's scratch arrays are not worth zeroing on every capture.)
struct Regs {
  uintptr_t ip;
  uintptr_t sp;
  uintptr_t bp;
};

// How a frame led to its caller: by which rule (packed), where the caller's
// ip and rbp were read (bp_at 0: rbp unchanged), and whether the CFA was rbp's
// value plus an offset.
struct Transition {
  uint64_t rule;
  uintptr_t ra_at;
  uintptr_t bp_at;
  bool from_rbp;
};

enum class Step { kCaller, kEnd, kDecline };

// Moves `r` from a frame to its caller by the frame's rule (FrameRule of its
// ip). Every read is checked against the thread's stack: [sp, hi).
__attribute__((no_sanitize("address", "hwaddress", "thread"))) inline Step StepByRule(
    const StackBounds& stack, uint64_t rule, Regs* r, Transition* t) {
  t->rule = rule;
  if ((rule & kOk) == 0) return Step::kDecline;
  if ((rule & kOutermost) != 0) return Step::kEnd;
  t->from_rbp = (rule & kCfaFromRbp) != 0;
  const uintptr_t cfa = (t->from_rbp ? r->bp : r->sp) + CfaOffset(rule);
  t->ra_at = cfa + RaOffset(rule);
  // Each frame's CFA lies above the last one, and what is read lies in between.
  const uintptr_t last_word = stack.hi - sizeof(uintptr_t);
  if (cfa <= r->sp || cfa > stack.hi || t->ra_at < r->sp || t->ra_at > last_word) {
    return Step::kDecline;
  }
  t->bp_at = 0;
  if ((rule & kRbpSaved) != 0) {
    t->bp_at = cfa + RbpOffset(rule);
    if (t->bp_at < r->sp || t->bp_at > last_word) return Step::kDecline;
    r->bp = LoadWord(t->bp_at);
  }
  r->ip = LoadWord(t->ra_at);
  r->sp = cfa;
  return r->ip == 0 ? Step::kEnd : Step::kCaller;  // a zero return address ends the chain
}

// ---- The last walk of each thread ------------------------------------------
//
// Successive captures on a thread share most of their frames: the training
// loop, the model's layers, main. Walking a frame by its rule is a chain of
// dependent loads (the return address, its rule, the next CFA), about 7 ns a
// frame however few instructions it takes. So each thread keeps the frames
// of its last walk: each frame's registers and how it led to its caller.
// When the walk reaches a frame with the same ip and sp as a recorded one,
// the recorded frames below it are still this stack's as long as the return
// addresses they were read from hold the same values, and rbp is the same
// wherever a frame's CFA was computed from it (rbp often holds data, so it
// is followed, not compared). Those are independent loads: checking a frame
// costs about a nanosecond. The first difference ends the check, and the
// walk goes on by rules from the last frame that matched.
//
// The check is two passes over arrays of the record (one array per field,
// so that the first pass is a load and a compare a frame): the return
// addresses, then, for the few frames whose CFA is rbp plus an offset, rbp.
// A frame's rbp is never followed frame by frame: it is the value saved by
// the nearest frame below it that saved rbp (a bit mask finds that frame),
// or, when none did since the join, the register's value at the join.
constexpr int kRemembered = 64;  // frames kept per thread (one bit each in a mask)
constexpr int kFresh = 24;       // frames walked by rule looking for a recorded one

// The bits [from, to) of a 64-bit mask.
inline uint64_t Bits(int from, int to) {
  const auto low = [](int n) { return n >= 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1; };
  return low(to) & ~low(from);
}

// The frames of a walk, one array per field: frame i's registers, its rule
// (0: not known), where its caller's ip was read and, when its rule saved rbp,
// where rbp was saved; bit i of the masks: frame i's CFA was rbp plus an
// offset, frame i saved rbp. The rule spares a walk that leaves the record at
// frame i (its caller differs) the lookup: the rules of an ip do not change
// between flushes, and a flush empties the record.
struct Frames {
  uintptr_t ip[kRemembered];
  uintptr_t sp[kRemembered];
  uintptr_t bp[kRemembered];
  uint64_t rule[kRemembered];
  uintptr_t ra_at[kRemembered];  // frame i to its caller (valid for i < count - 1)
  uintptr_t bp_at[kRemembered];
  uint64_t cfa_rbp = 0;
  uint64_t saves_rbp = 0;

  void Set(int i, const Regs& frame, const Transition& t) {
    ip[i] = frame.ip;
    sp[i] = frame.sp;
    bp[i] = frame.bp;
    SetTransition(i, t);
  }
  void SetTransition(int i, const Transition& t) {
    rule[i] = t.rule;
    ra_at[i] = t.ra_at;
    bp_at[i] = t.bp_at;
    const uint64_t bit = uint64_t{1} << i;
    cfa_rbp = (cfa_rbp & ~bit) | (static_cast<uint64_t>(t.from_rbp) << i);
    saves_rbp = (saves_rbp & ~bit) | (static_cast<uint64_t>(t.bp_at != 0) << i);
  }
  // A walk's last frame, whose caller it did not look for: no transition.
  void SetLast(int i, const Regs& frame) {
    ip[i] = frame.ip;
    sp[i] = frame.sp;
    bp[i] = frame.bp;
    rule[i] = 0;
    const uint64_t bit = uint64_t{1} << i;
    cfa_rbp &= ~bit;
    saves_rbp &= ~bit;
  }
  Regs RegsOf(int i) const { return {ip[i], sp[i], bp[i]}; }
};

struct Record : Frames {
  uint64_t generation = 0;  // g_generation when recorded; the rules may have changed since
  uint64_t reused = 0;      // frames taken from the record so far (tests)
  int count = 0;            // frames recorded, innermost first
};
// 3.1 KiB a thread, mapped on the thread's first capture (base/thread_block.h).
Record* ThreadRecord() { return ThreadBlock<Record>::Get(); }

// Bits [from, from + n) of `mask` moved to start at `to`, bits below `to` kept
// and those above the moved ones cleared.
inline uint64_t MoveBits(uint64_t mask, int from, int to, int n) {
  return (mask & Bits(0, to)) | (((mask >> from) & Bits(0, n)) << to);
}

// Moves the recorded frames [from, count) to start at `to` (at most kRemembered kept).
void Shift(Record* rec, int from, int to) {
  if (from == to) return;
  const int moved = std::min(rec->count - from, kRemembered - to);
  const size_t bytes = static_cast<size_t>(moved) * sizeof(uintptr_t);
  for (uintptr_t* field : {rec->ip, rec->sp, rec->bp, rec->rule, rec->ra_at, rec->bp_at}) {
    std::memmove(field + to, field + from, bytes);
  }
  // A frame's rule is its ip's, or its ip's - 1 when not the innermost
  // (FrameRule): one that becomes or stops being the innermost has neither.
  if (from == 0 || to == 0) rec->rule[to] = 0;
  rec->cfa_rbp = MoveBits(rec->cfa_rbp, from, to, moved);
  rec->saves_rbp = MoveBits(rec->saves_rbp, from, to, moved);
  rec->count = to + moved;
}

// A frame walked by rule before the walk joined the record (or gave up
// looking), and how it led to its caller.
struct FreshFrame {
  Regs regs;
  Transition t;
};

// Copies fresh[0, count) to the record's frames [at, at + count). Mostly a
// frame or two (where successive walks diverge): a frame at a time (kept in
// one struct each, so that the copy is not made six memcpy's).
inline void Adopt(Record* rec, int at, const FreshFrame* fresh, int count) {
  for (int i = 0; i < count; ++i) rec->Set(at + i, fresh[i].regs, fresh[i].t);
}

// This walk's rbp in recorded frame i, for a walk that joined the record at
// frame `joined` (i >= joined) with rbp `bp_joined`, where frames [joined, i)
// are the record's: the value the nearest of them that saved rbp saved.
__attribute__((no_sanitize("address", "hwaddress", "thread"))) inline uintptr_t RbpAt(
    const Record& rec, int joined, int i, uintptr_t bp_joined) {
  const uint64_t saved = rec.saves_rbp & Bits(joined, i);
  if (saved == 0) return bp_joined;
  return LoadWord(rec.bp_at[63 - std::countl_zero(saved)]);
}

// Takes the record's frames from `k` on, where this walk has joined it
// (frame k is the same in both, with rbp `bp` in this walk), while they are
// still this stack's: counts the ips of frames k + 1 ... as this walk's pcs
// [*n, size) and returns the last frame taken, with its rbp in this walk
// stored. The pcs are not copied: they stay in the record (rec.ip[i + 1] is
// pc i), where the walk's caller reads them (Finish).
__attribute__((always_inline, no_sanitize("address", "hwaddress", "thread"))) inline int
TakeRecorded(Record* record, int k, uintptr_t bp, int* n, int size) {
  Record& rec = *record;
  // The addresses were checked against this thread's stack when they were
  // recorded, for a frame with this same sp: no need again.
  const ptrdiff_t last = std::min(rec.count - 1, k + (size - *n));
  // Four frames a test while they match (independent loads, one branch),
  // then frame by frame to the first difference. Every address read lies in
  // [sp, hi) of this walk: the recorded frames from k on are above frame k.
  // (Pointers and a count left: the least bookkeeping a block.)
  const uintptr_t* ra_at = rec.ra_at + k;
  const uintptr_t* ip = rec.ip + k + 1;
  ptrdiff_t left = last - k;
  for (; left >= 4; left -= 4, ra_at += 4, ip += 4) {
    const uintptr_t differ = (LoadWord(ra_at[0]) ^ ip[0]) | (LoadWord(ra_at[1]) ^ ip[1]) |
                             (LoadWord(ra_at[2]) ^ ip[2]) | (LoadWord(ra_at[3]) ^ ip[3]);
    if (differ != 0) break;
  }
  for (; left > 0 && LoadWord(*ra_at) == *ip; --left, ++ra_at, ++ip) {
  }
  int end = static_cast<int>(last - left);
  // A frame whose CFA was rbp plus an offset led to its recorded caller only
  // with the recorded rbp. (A recorded rbp that no CFA depends on may differ
  // from this walk's: it is never used.)
  for (uint64_t from_rbp = rec.cfa_rbp & Bits(k, end); from_rbp != 0; from_rbp &= from_rbp - 1) {
    const int i = std::countr_zero(from_rbp);
    if (RbpAt(rec, k, i, bp) != rec.bp[i]) {
      end = i;
      break;
    }
  }
  *n += end - k;
  rec.reused += static_cast<uint64_t>(end - k);
  rec.bp[end] = RbpAt(rec, k, end, bp);
  return end;
}

// Where a walk that ends with n pcs and this record finds them: the
// record's ips from frame 1 on (TakeRecorded leaves them there) while it
// holds every frame of the walk; else `buffer`, where the frames walked by
// rule past the record's end are, with the recorded ones copied in front.
inline int Finish(const Record& rec, uintptr_t* buffer, int n, const uintptr_t** pcs) {
  if (n < rec.count) {
    *pcs = rec.ip + 1;
    return n;
  }
  if (rec.count > 1) {
    std::memcpy(buffer, rec.ip + 1, static_cast<size_t>(rec.count - 1) * sizeof(uintptr_t));
  }
  *pcs = buffer;
  return n;
}

}  // namespace

int CfiRulesCached() { return g_cached.load(std::memory_order_relaxed); }

bool CfiRuleIsCached(uintptr_t pc) { return CachedRule(pc) != 0; }

void SetRuleComputedHookForTest(void (*hook)(uintptr_t pc)) {
  g_rule_computed_hook.store(hook, std::memory_order_relaxed);
}

uint64_t CfiFramesReused() {
  const Record* rec = ThreadRecord();
  return rec != nullptr ? rec->reused : 0;
}

}  // namespace internal

void FlushCfiRules() {
  // Moved before the slots are cleared too: a rule computed meanwhile sees
  // it and is not kept (RuleFor).
  internal::g_generation.fetch_add(1, std::memory_order_acq_rel);
  for (internal::Slot& slot : internal::g_slots) {
    slot.rule.store(0, std::memory_order_relaxed);
    slot.pc.store(0, std::memory_order_release);
  }
  internal::g_cached.store(0, std::memory_order_relaxed);
  internal::g_generation.fetch_add(1, std::memory_order_release);
}

namespace {

// CfiBacktrace and CfiBacktraceInPlace: the walk, inlined into each (its
// first frame is theirs). Sets *pcs to where the n pcs are (Finish).
__attribute__((always_inline, no_sanitize("address", "hwaddress", "thread"))) inline int Walk(
    uintptr_t* buffer, int size, const uintptr_t** pcs) {
  *pcs = buffer;
#if defined(__x86_64__)
  using namespace internal;  // NOLINT(google-build-using-namespace): the walker's own helpers
  if (size <= 0) return 0;
  Regs r{};
  // The registers at one instruction: its own rule describes them.
  asm volatile("leaq 0(%%rip), %0\n\tmovq %%rsp, %1\n\tmovq %%rbp, %2"
               : "=r"(r.ip), "=r"(r.sp), "=r"(r.bp));
  const StackBounds& stack = ThreadStack();
  if (r.sp < stack.lo || r.sp >= stack.hi) return -1;  // not on the thread's stack, or no bounds
  Record* record = ThreadRecord();
  if (record == nullptr) return -1;
  Record& rec = *record;
  const uint64_t generation = g_generation.load(std::memory_order_acquire);
  if (rec.generation != generation) {
    rec.generation = generation;
    rec.count = 0;
  }
  // This walk's frames so far: the record's [0, f) (final), then fresh[0, m),
  // walked by rule since the last join. r is frame f + m, stored nowhere yet.
  // The last walk's frames not passed yet are the record's [j, rec.count):
  // their sps rise with depth, as this walk's do, so one cursor finds a join.
  FreshFrame fresh[kFresh];
  int n = 0;  // pcs found; pc i - 1 is frame i's ip (in buffer or the record: Finish)
  int f = 0;
  int m = 0;
  int j = 0;
  bool joining = true;
  for (;;) {
    if (joining) {
      while (j < rec.count && rec.sp[j] < r.sp) ++j;
      if (j < rec.count && rec.sp[j] == r.sp && rec.ip[j] == r.ip && f + m < kRemembered) {
        // The last walk's frames from j on are this walk's from k on, as
        // far as TakeRecorded finds them unchanged.
        int k = f + m;
        if (j != k) Shift(&rec, j, k);
        Adopt(&rec, f, fresh, m);
        k = TakeRecorded(&rec, k, r.bp, &n, size);
        if (n == size)
          return Finish(rec, buffer, n,
                        pcs);  // the frames beyond stay recorded: still the last walk's
        // Frame k is this walk's; its caller is found by rule, below. The
        // last walk's frames after k are still candidates.
        r = rec.RegsOf(k);
        Transition t{};
        const uint64_t known = rec.rule[k];
        const Step step = StepByRule(stack, known != 0 ? known : FrameRule(r.ip, k == 0), &r, &t);
        rec.SetTransition(k, t);
        if (step == Step::kDecline) {
          rec.count = 0;
          return -1;
        }
        if (step == Step::kEnd) {
          rec.count = k + 1;
          return Finish(rec, buffer, n, pcs);
        }
        buffer[n++] = r.ip;
        if (n == size) {
          // The caller is recorded too, so that the next walk as deep
          // takes it from the record instead of stepping to it again.
          rec.count = k + 1;
          if (k + 1 < kRemembered) {
            rec.SetLast(k + 1, r);
            rec.count = k + 2;
          }
          return Finish(rec, buffer, n, pcs);
        }
        f = k + 1;
        m = 0;
        j = k + 1;
        continue;
      }
      if (m == kFresh || f + m == kRemembered) {
        // No join in sight: keep what was walked and go on by rules alone.
        Adopt(&rec, f, fresh, m);
        f += m;
        m = 0;
        rec.count = f;
        joining = false;
      }
    }
    // One frame by its rule.
    const Regs frame = r;
    Transition t{};
    const Step step = StepByRule(stack, FrameRule(r.ip, f + m == 0), &r, &t);
    if (step == Step::kDecline) {
      rec.count = 0;
      return -1;
    }
    if (joining) {
      fresh[m] = {frame, t};
      ++m;
    } else {
      if (f < kRemembered) {
        rec.Set(f, frame, t);
        rec.count = f + 1;
      }
      ++f;
    }
    if (step == Step::kCaller) buffer[n++] = r.ip;
    if (step == Step::kEnd || n == size) {
      if (joining) {
        Adopt(&rec, f, fresh, m);
        f += m;
        rec.count = f;
      }
      // As above: a walk cut short records the caller it reached.
      if (step == Step::kCaller && f < kRemembered) {
        rec.SetLast(f, r);
        rec.count = f + 1;
      }
      return Finish(rec, buffer, n, pcs);
    }
  }
#else
  (void)size;
  return -1;
#endif
}

}  // namespace

__attribute__((noinline, no_sanitize("address", "hwaddress", "thread"))) int CfiBacktrace(
    uintptr_t* buffer, int size) {
  const uintptr_t* pcs = buffer;
  const int n = Walk(buffer, size, &pcs);
  if (n > 0 && pcs != buffer) std::memcpy(buffer, pcs, static_cast<size_t>(n) * sizeof(uintptr_t));
  return n;
}

__attribute__((noinline, no_sanitize("address", "hwaddress", "thread"))) int CfiBacktraceInPlace(
    uintptr_t* buffer, int size, const uintptr_t** pcs) {
  return Walk(buffer, size, pcs);
}

}  // namespace gpuwatch
