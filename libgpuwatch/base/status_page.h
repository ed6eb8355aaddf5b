// The status page: what a process under gpuwatch is doing, readable when it
// cannot answer its live socket (hung in a CUDA call, stopped with SIGSTOP,
// its gpuwatch thread unable to run). A small shared file per process next
// to its socket in the live directory, `<pid>.status`, mapped by the process
// and read by `gpuwatch why`, `gpuwatch top` and `gpuwatch exporter`
// (docs/live.md, "The status page").
//
// Each thread that makes a CUDA call claims one slot, once, and writes the
// call in progress (its name, since when, its site's stack id) and the last
// completed call there with plain stores under the slot's sequence counter:
// no system call, no lock, no allocation on the call path. gpuwatch's
// background thread writes, once a second, what the process holds per
// device, its last checkpoint, and the site of each call in progress as
// "file:line" (resolved from the stack id) under counters of its own.
//
// A reader maps the file read-only and copies each part under its counter,
// retrying while it is odd (a write in progress); a part whose writer was
// stopped in the middle of a write stays odd and is reported as torn.
#ifndef GPUWATCH_LIBGPUWATCH_BASE_STATUS_PAGE_H_
#define GPUWATCH_LIBGPUWATCH_BASE_STATUS_PAGE_H_

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "libgpuwatch/base/clock.h"

namespace gpuwatch {

inline constexpr uint32_t kStatusMagic = 0x50535747;  // "GWSP" in the file's first bytes
inline constexpr uint32_t kStatusVersion = 1;
inline constexpr int kStatusThreadSlots = 64;
inline constexpr int kStatusDevices = 16;
inline constexpr int kStatusCallNames = 512;
inline constexpr size_t kStatusNameBytes = 48;
inline constexpr size_t kStatusSiteWords = 16;  // 128 bytes of "file:line"
inline constexpr size_t kStatusPathWords = 64;  // 512 bytes of a checkpoint's path

// A string in whole words of relaxed atomics, so that a reader's copy under
// the counter is no data race.
template <size_t kWords>
struct StatusText {
  std::atomic<uint64_t> words[kWords];
  void Store(const std::string& s);  // cut to kWords * 8 - 1 bytes
  std::string Load() const;
};

// One thread's slot. The thread alone writes `seq` and the call fields; the
// background thread alone writes `site_seq` and the site fields.
struct StatusThread {
  std::atomic<uint32_t> seq;
  std::atomic<int32_t> tid;          // 0: free; claimed by a compare-exchange
  std::atomic<uint32_t> call;        // the call in progress: its name's index + 1; 0: none
  std::atomic<uint32_t> stack_id;    // its site, when captured (0: not)
  std::atomic<uint64_t> call_start;  // Ticks()
  std::atomic<uint32_t> last_call;   // the last completed call's name index + 1; 0: none
  std::atomic<uint32_t> reserved;
  std::atomic<uint64_t> last_end;  // Ticks()
  std::atomic<uint64_t> calls;     // calls completed
  std::atomic<uint32_t> site_seq;
  std::atomic<uint32_t> site_stack_id;  // the stack `site` was resolved from
  StatusText<kStatusSiteWords> site;
};

// What the background thread writes once a second, under `seq`.
struct StatusProcess {
  std::atomic<uint32_t> seq;
  std::atomic<uint32_t> threads_without_slot;          // threads that found every slot taken
  std::atomic<uint64_t> updated_ns;                    // CLOCK_MONOTONIC of the last write
  std::atomic<uint64_t> updated_ticks;                 // Ticks() then
  std::atomic<uint64_t> device_bytes[kStatusDevices];  // live device memory per device
  std::atomic<uint64_t> checkpoint_ns;  // CLOCK_MONOTONIC of the last checkpoint; 0: none
  StatusText<kStatusPathWords> checkpoint_path;
};

// The page, as mapped. The header is written before the file gets its name.
struct StatusPage {
  uint32_t magic;
  uint32_t version;
  uint32_t size;  // bytes: sizeof(StatusPage) of its writer
  int32_t pid;
  uint32_t thread_slots;
  uint32_t call_names;
  uint64_t started_ns;     // CLOCK_MONOTONIC at attach
  uint64_t started_ticks;  // Ticks() then
  uint32_t ticks_are_ns;   // 1: Ticks() counts CLOCK_MONOTONIC ns (kTicksAreNs)
  int32_t parent_pid;      // getppid() when the page was made (0: unknown): to tell an orphan
  StatusProcess process;
  StatusThread threads[kStatusThreadSlots];
  char names[kStatusCallNames][kStatusNameBytes];  // the calls' names, by index
};

// --- The writer: the process under gpuwatch ---------------------------------

// The page this process writes, null when none (GPUWATCH_LIVE off, or it
// could not be made).
extern std::atomic<StatusPage*> g_status_page;
// The calling thread's slot; null until its first call (then claimed).
extern thread_local constinit StatusThread* t_status_slot
    __attribute__((tls_model("initial-exec")));

// Claims a slot for the calling thread (its first call), or a shared slot
// no one reads when all are taken; null when there is no page.
StatusThread* ClaimStatusSlot();

// The call path's clock is base/clock.h's Ticks() (the time-stamp counter
// on x86-64: one instruction): the background thread writes it beside
// CLOCK_MONOTONIC each second, and a reader converts between the two pairs.

// The call path's two writes: a call (`name_index` in the page's names)
// begins with its site's stack id (0: not captured), and the call in
// progress ends. StatusCallBegins returns the Ticks() it wrote (0 when there
// is no page), for a caller that needs the call's start too: one counter
// read per event.
inline uint64_t StatusCallBegins(uint32_t name_index, uint32_t stack_id) {
  StatusThread* s = t_status_slot;
  if (s == nullptr) [[unlikely]] {
    s = ClaimStatusSlot();
    if (s == nullptr) return 0;
  }
  const uint64_t now = Ticks();
  const uint32_t q = s->seq.load(std::memory_order_relaxed);
  s->seq.store(q + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  s->call.store(name_index + 1, std::memory_order_relaxed);
  s->stack_id.store(stack_id, std::memory_order_relaxed);
  s->call_start.store(now, std::memory_order_relaxed);
  s->seq.store(q + 2, std::memory_order_release);
  return now;
}

// Returns the Ticks() it wrote, 0 when there is no page.
inline uint64_t StatusCallEnds() {
  StatusThread* s = t_status_slot;
  if (s == nullptr) return 0;
  const uint64_t now = Ticks();
  const uint32_t q = s->seq.load(std::memory_order_relaxed);
  s->seq.store(q + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  s->last_call.store(s->call.load(std::memory_order_relaxed), std::memory_order_relaxed);
  s->last_end.store(now, std::memory_order_relaxed);
  s->calls.store(s->calls.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  s->call.store(0, std::memory_order_relaxed);
  s->seq.store(q + 2, std::memory_order_release);
  return now;
}

// "<dir>/<pid>.status".
std::string StatusPagePath(const std::string& dir, pid_t pid);

// Makes this process's page at `path` (mode 0600, written whole under a
// temporary name, then renamed) with the calls' names (a suffix "_v<N>" is
// dropped), and publishes it. False with the reason in *problem.
bool OpenStatusPage(const std::string& path, const std::vector<const char*>& call_names,
                    std::string* problem);
// In a fork child, first: the parent's page is no longer written (the
// calling thread, the child's only one, forgets its slot; the mapping goes)
// nor removed at exit.
void DetachStatusPage();
// The page's file name is removed (at exit); the mapping stays, so that
// calls made later write where no one reads.
void RemoveStatusPageFile();

// The background thread's writes.
void StatusUpdateProcess(const uint64_t* device_bytes, int devices, uint64_t checkpoint_ns,
                         const std::string& checkpoint_path);
// Calls to resolve: each slot's call in progress whose site is not written
// yet, as (slot, stack id).
struct StatusSiteRequest {
  int slot = 0;
  uint32_t stack_id = 0;
};
std::vector<StatusSiteRequest> StatusSitesToResolve();
void StatusWriteSite(int slot, uint32_t stack_id, const std::string& site);

// --- The reader -----------------------------------------------------------

struct StatusThreadView {
  int32_t tid = 0;
  bool torn = false;  // its writer stopped in the middle of a write
  std::string call;   // the call in progress, "" when none
  uint64_t call_start_ns = 0;
  std::string site;       // its "file:line", "" when not known (yet)
  std::string last_call;  // the last completed call, "" when none
  uint64_t last_end_ns = 0;
  uint64_t calls = 0;
};

struct StatusView {
  int32_t pid = 0;
  int32_t parent_pid = 0;  // when the page was made; 0: unknown
  uint64_t started_ns = 0;
  uint64_t updated_ns = 0;  // 0: the background thread never wrote
  bool process_torn = false;
  uint32_t threads_without_slot = 0;
  std::vector<std::pair<int, uint64_t>> device_bytes;  // the devices holding memory
  uint64_t checkpoint_ns = 0;
  std::string checkpoint_path;
  std::vector<StatusThreadView> threads;  // the claimed slots
  uint64_t now_ns = 0;                    // CLOCK_MONOTONIC when read
};

// Times are known once gpuwatch's thread has written the page twice (its
// first second), where the time-stamp counter needs converting.
// Reads the page at `path`. False with a sentence in *problem: no such file
// ("no status page at ..."), not a page, another version, truncated.
bool ReadStatusPage(const std::string& path, StatusView* out, std::string* problem);

// The call in progress that has lasted longest (null when none).
const StatusThreadView* LongestCall(const StatusView& view);

// "12m 3s", "1h 2m", "4.2s".
std::string StatusDuration(uint64_t ns);

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_BASE_STATUS_PAGE_H_
