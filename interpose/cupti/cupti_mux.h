// Sharing CUPTI with the other CUPTI clients of the process.
//
// CUPTI allows one callback subscriber and one pair of activity buffer
// callbacks per process. gpuwatch holds the real ones and gives each other
// client (PyTorch's profiler, XLA's tracer, a ctypes tool) a view of its own,
// through the CUPTI entry points libgpuwatch.so exports (cupti_exports.cc) and
// its dlsym (dlsym_hook.cc), which hands those entry points to whoever looks
// CUPTI's functions up on a libcupti handle:
// - callbacks: up to kMaxClients subscribers, each delivered exactly the
//   domains and ids it enabled, after gpuwatch's own; none sees the
//   callbacks gpuwatch's own work causes;
// - activity records: one registration for all the other clients together,
//   as CUPTI has one per process. Records of the kinds they enabled are copied
//   into buffers their own request callback hands out, in a layout of
//   gpuwatch's that its cuptiActivityGetNextRecord reads, and handed to their
//   completion callback when CUPTI hands gpuwatch the buffer they came in;
//   enabling or disabling a kind flushes first, so each record goes to the
//   views whose kind was on when it was made;
// - cuptiFinalize, disable, unsubscribe and attributes act on the clients'
//   views; gpuwatch's own stay as they are.
// gpuwatch itself is a client too ("self", through SelfView()). With no other
// client the callback path pays one relaxed load (Active()).
#ifndef GPUWATCH_INTERPOSE_CUPTI_CUPTI_MUX_H_
#define GPUWATCH_INTERPOSE_CUPTI_CUPTI_MUX_H_

#include <cupti.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "interpose/cupti/cupti_loader.h"

namespace gpuwatch::mux {

inline constexpr int kMaxClients = 8;

// Loads the process's CUPTI once (LoadCupti, with GPUWATCH_CUPTI_LIBRARY
// as `explicit_path` the first time). Null with `error` when none loads.
const CuptiApi* Real(const std::string& explicit_path, std::string* error);

// gpuwatch's own view: `real` with subscription, callback enabling and the
// activity registration and enabling routed through the multiplexer.
CuptiApi SelfView(const CuptiApi& real);

// Real() for a call of another client, which may come before gpuwatch's
// attach read its configuration: GPUWATCH_CUPTI_LIBRARY from the environment.
const CuptiApi* RealForClients();

// True while another client is subscribed: callbacks then go through
// Dispatch() instead of straight to gpuwatch.
extern std::atomic<bool> g_active;
inline bool Active() { return g_active.load(std::memory_order_relaxed); }

// Delivers one callback to gpuwatch (when it enabled it) and to every client
// that enabled it.
void Dispatch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data);

// True when gpuwatch's subscription was taken from under it (another client
// called CUPTI's own cuptiFinalize or cuptiUnsubscribe, as one can where
// gpuwatch was loaded by the driver alone): CUPTI no longer has the ids it
// enabled on. One CUPTI call; not for the callback path.
bool SelfDetached();

// Whether gpuwatch enabled activity records of `kind` (CUPTI_ACTIVITY_KIND_*):
// a buffer may hold kinds only another client asked for.
bool SelfWantsKind(uint32_t kind);

// --- The other clients' CUPTI, behind the exported entry points ------------
CUptiResult ClientSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                            void* userdata, CUpti_SubscriberParams* params);
CUptiResult ClientUnsubscribe(CUpti_SubscriberHandle subscriber);
CUptiResult ClientEnableCallback(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                 CUpti_CallbackDomain domain, CUpti_CallbackId cbid);
CUptiResult ClientEnableDomain(uint32_t enable, CUpti_SubscriberHandle subscriber,
                               CUpti_CallbackDomain domain);
CUptiResult ClientEnableAllDomains(uint32_t enable, CUpti_SubscriberHandle subscriber);
CUptiResult ClientGetCallbackState(uint32_t* enable, CUpti_SubscriberHandle subscriber,
                                   CUpti_CallbackDomain domain, CUpti_CallbackId cbid);
CUptiResult ClientFinalize();

CUptiResult ClientActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc request,
                                            CUpti_BuffersCallbackCompleteFunc complete);
CUptiResult ClientActivityEnable(CUpti_ActivityKind kind, bool enable);
CUptiResult ClientActivityFlushAll(uint32_t flag);
CUptiResult ClientActivityGetNextRecord(uint8_t* buffer, size_t valid_size,
                                        CUpti_Activity** record);
CUptiResult ClientActivityGetNumDroppedRecords(CUcontext context, uint32_t stream_id,
                                               size_t* dropped);
CUptiResult ClientActivitySetAttribute(CUpti_ActivityAttribute attribute, size_t* value_size,
                                       void* value);
CUptiResult ClientActivityGetAttribute(CUpti_ActivityAttribute attribute, size_t* value_size,
                                       void* value);

// fork(): the multiplexer's locks (subscription and activity state) are
// taken around it, after gpuwatch's background lock and before report_mu.
void LockForFork();
void UnlockAfterFork();

// --- Shared by the two halves (cupti_mux.cc, cupti_mux_activity.cc) --------
namespace internal {
// Flushes CUPTI's activity buffers (no mux lock may be held).
void FlushReal(uint32_t flag);
// The clients' activity view is reset (cuptiFinalize).
void FinalizeClientActivity();
void LockActivityForFork();
void UnlockActivityAfterFork();
}  // namespace internal

}  // namespace gpuwatch::mux

#endif  // GPUWATCH_INTERPOSE_CUPTI_CUPTI_MUX_H_
