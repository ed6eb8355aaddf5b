// Stream capture: cuStreamBeginCapture .. cuStreamEndCapture, and the hooks through which the
// driver's stream operations become graph nodes or are refused while a capture is open.
//
// Rules kept (cuda.h, cuStreamBeginCapture / cuThreadExchangeStreamCaptureMode /
// cuStreamIsCapturing and the CUDA_ERROR_STREAM_CAPTURE_* codes):
// - work submitted to a capturing stream becomes a node depending on the stream's current
//   dependencies (cuEventRecord in it captures those for a later cuStreamWaitEvent: fork/join);
// - a synchronous operation on a capturing stream is refused (UNSUPPORTED) and invalidates the
//   capture; so is a potentially unsafe call while the thread's mode prohibits it;
// - work on the legacy stream while a blocking stream of its context captures is refused
//   (IMPLICIT) and invalidates those captures;
// - waiting in a capture on an event recorded outside it is refused (ISOLATION), joining two
//   captures too (MERGE); using an event last recorded in a capture is refused (CAPTURED_EVENT);
// - cuStreamEndCapture of an invalidated capture, or of one with an unjoined fork, returns a
//   NULL graph (INVALIDATED, UNJOINED).
#include <pthread.h>

#include <algorithm>

#include "driver/graph_internal.h"
#include "driver/trace.h"

namespace gwsim::drv {

namespace {

thread_local CUstreamCaptureMode t_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

uint64_t SelfId() { return static_cast<uint64_t>(pthread_self()); }

bool Idle() { return g_open_captures.load(std::memory_order_acquire) == 0 || ExecutingGraph(); }

// Whether event records and waits need no capture bookkeeping: no capture open and no event
// recorded in one, or a graph launch executing.
bool EventsIdle() {
  return (g_open_captures.load(std::memory_order_acquire) == 0 &&
          g_captured_events.load(std::memory_order_acquire) == 0) ||
         ExecutingGraph();
}

bool IsLegacy(const CUstream_st* s) { return s == s->ctx->legacy_stream; }

bool ValidMode(CUstreamCaptureMode mode) {
  return mode == CU_STREAM_CAPTURE_MODE_GLOBAL || mode == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL ||
         mode == CU_STREAM_CAPTURE_MODE_RELAXED;
}

void AddUnique(std::vector<Capture*>* v, Capture* c) {
  if (std::find(v->begin(), v->end(), c) == v->end()) v->push_back(c);
}

void InvalidateAll(const std::vector<Capture*>& captures) {
  for (Capture* c : captures) c->invalidated = true;
}

// The captures of blocking streams of ctx, which work on its legacy stream would depend on.
std::vector<Capture*> BlockingCapturesLocked(const CUctx_st* ctx) {
  std::vector<Capture*> out;
  for (const auto& [stream, sc] : Graphs().streams) {
    if (stream->ctx == ctx && (stream->flags & CU_STREAM_NON_BLOCKING) == 0) {
      AddUnique(&out, sc.capture);
    }
  }
  return out;
}

// Work on ctx's legacy stream would depend on every capture of a blocking stream of ctx: it
// invalidates them. True when s is the legacy stream and there were such captures.
bool LegacyWorkInvalidatesLocked(CUstream_st* s) {
  if (!IsLegacy(s)) return false;
  const auto blocking = BlockingCapturesLocked(s->ctx);
  InvalidateAll(blocking);
  return !blocking.empty();
}

// The captures that prohibit this thread's potentially unsafe calls, by its interaction mode.
std::vector<Capture*> ProhibitingLocked() {
  std::vector<Capture*> out;
  if (t_mode == CU_STREAM_CAPTURE_MODE_RELAXED) return out;
  const uint64_t self = SelfId();
  for (Capture* c : Graphs().captures) {
    const bool own = c->thread == self && c->mode != CU_STREAM_CAPTURE_MODE_RELAXED;
    const bool other = t_mode == CU_STREAM_CAPTURE_MODE_GLOBAL && c->thread != self &&
                       c->mode == CU_STREAM_CAPTURE_MODE_GLOBAL;
    if (own || other) out.push_back(c);
  }
  return out;
}

struct Verdict {
  enum Kind { kRun, kCapture, kRefuse };
  Kind kind = kRun;
  CUresult result = CUDA_SUCCESS;
  StreamCapture* capture = nullptr;
};

// What happens to an operation on stream s (synchronous: the caller waits for it).
Verdict CheckLocked(CUstream_st* s, bool synchronous) {
  GraphState& g = Graphs();
  if (auto it = g.streams.find(s); it != g.streams.end()) {
    Capture* c = it->second.capture;
    if (c->invalidated) return {Verdict::kRefuse, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED};
    if (synchronous) {
      c->invalidated = true;
      return {Verdict::kRefuse, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED};
    }
    return {Verdict::kCapture, CUDA_SUCCESS, &it->second};
  }
  if (synchronous) {
    if (const auto why = ProhibitingLocked(); !why.empty()) {
      InvalidateAll(why);
      return {Verdict::kRefuse, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED};
    }
  }
  if (LegacyWorkInvalidatesLocked(s)) return {Verdict::kRefuse, CUDA_ERROR_STREAM_CAPTURE_IMPLICIT};
  return {};
}

// Adds a node for the stream's next operation; the stream then depends on it alone.
CUresult CaptureNodeLocked(StreamCapture* sc, const NodeData& data, GraphEvents* events,
                           CUgraphNode_st** out) {
  CUgraphNode_st* n = nullptr;
  const CUresult r =
      AddNodeLocked(sc->capture->graph, sc->deps.data(), sc->deps.size(), data, &n, events);
  if (r != CUDA_SUCCESS) return r;
  sc->deps.assign(1, n);
  sc->edges.assign(1, CUgraphEdgeData{});
  if (out != nullptr) *out = n;
  return CUDA_SUCCESS;
}

// The common path of the operation hooks: `make` fills the node's data (or returns an error);
// `node` receives the node made.
template <typename Make>
std::optional<CUresult> StreamWork(CUstream_st* s, bool synchronous, Make&& make,
                                   CUgraphNode_st** node = nullptr) {
  if (Idle()) return std::nullopt;
  GraphEvents events;
  CUresult result;
  {
    std::lock_guard lock(Graphs().mu);
    const Verdict v = CheckLocked(s, synchronous);
    if (v.kind == Verdict::kRun) return std::nullopt;
    if (v.kind == Verdict::kRefuse) return v.result;
    NodeData data;
    result = make(&data);
    if (result == CUDA_SUCCESS) {
      result = CaptureNodeLocked(v.capture, data, &events, node);
    } else if (data.type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
      delete data.alloc;
    }
  }
  events.Emit();  // GRAPHNODE_CREATED inside the captured call
  return result;
}

// A refusal for an operation that cannot be captured at all.
std::optional<CUresult> RefuseInCapture(CUstream_st* s) {
  if (Idle()) return std::nullopt;
  std::lock_guard lock(Graphs().mu);
  GraphState& g = Graphs();
  if (auto it = g.streams.find(s); it != g.streams.end()) {
    it->second.capture->invalidated = true;
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  if (LegacyWorkInvalidatesLocked(s)) return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
  return std::nullopt;
}

bool SpanOf(const CopyShape& s, size_t pitch, size_t slice, size_t* out) {
  if (s.height > 1 && pitch < s.width) return false;
  if (s.depth > 1 && slice < pitch * (s.height - 1) + s.width) return false;
  *out = (s.depth - 1) * slice + (s.height - 1) * pitch + s.width;
  return true;
}

// Every node reachable backwards from `from`, and `from` itself.
void AncestorsLocked(const std::vector<CUgraphNode_st*>& from,
                     std::unordered_set<CUgraphNode_st*>* out) {
  std::vector<CUgraphNode_st*> todo(from.begin(), from.end());
  while (!todo.empty()) {
    CUgraphNode_st* n = todo.back();
    todo.pop_back();
    if (!out->insert(n).second) continue;
    todo.insert(todo.end(), n->deps.begin(), n->deps.end());
  }
}

CUresult ValidateEdges(const CUgraphEdgeData* edges, size_t count) {
  for (size_t i = 0; edges != nullptr && i < count; ++i) {
    const CUgraphEdgeData& e = edges[i];
    if (e.to_port != 0) return CUDA_ERROR_INVALID_VALUE;
    if (e.from_port != 0 || e.type != 0) return CUDA_ERROR_NOT_SUPPORTED;
  }
  return CUDA_SUCCESS;
}

}  // namespace

CUstreamCaptureMode& ThreadCaptureMode() { return t_mode; }

std::optional<CUresult> CaptureCopy(const CopyRequest& request, CUstream_st* stream) {
  return StreamWork(stream, !request.async, [&](NodeData* d) {
    const CopyShape& s = request.shape;
    size_t src_span = 0;
    size_t dst_span = 0;
    if (request.dst == 0 || request.src == 0 || !SpanOf(s, s.src_pitch, s.src_slice, &src_span) ||
        !SpanOf(s, s.dst_pitch, s.dst_slice, &dst_span)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    // Device memory, or the memory of an allocation node (used by nodes ordered after it).
    if ((request.dst_side == Side::kDevice && !DeviceOrGraphMemoryLocked(request.dst, dst_span)) ||
        (request.src_side == Side::kDevice && !DeviceOrGraphMemoryLocked(request.src, src_span))) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    d->type = CU_GRAPH_NODE_TYPE_MEMCPY;
    d->copy = request;
    return CUDA_SUCCESS;
  });
}

std::optional<CUresult> CaptureMemset(uintptr_t dst, uint32_t value, unsigned element_size,
                                      size_t width, size_t height, size_t pitch,
                                      CUstream_st* stream) {
  return StreamWork(stream, false, [&](NodeData* d) {
    d->type = CU_GRAPH_NODE_TYPE_MEMSET;
    d->memset = MemsetParams{dst, value, element_size, width, height, pitch};
    return CUDA_SUCCESS;
  });
}

std::optional<CUresult> CaptureLaunch(const LaunchRequest& request, CUstream_st* stream) {
  return StreamWork(stream, false, [&](NodeData* d) {
    d->type = CU_GRAPH_NODE_TYPE_KERNEL;
    d->kernel = request;
    return CUDA_SUCCESS;
  });
}

std::optional<CUresult> CaptureHostFunc(CUstream_st* stream, CUhostFn fn, void* data) {
  return StreamWork(stream, false, [&](NodeData* d) {
    d->type = CU_GRAPH_NODE_TYPE_HOST;
    d->host_fn = fn;
    d->host_data = data;
    return CUDA_SUCCESS;
  });
}

std::optional<CUresult> CaptureAllocAsync(CUdeviceptr* dptr, size_t size, CUmemPoolHandle_st* pool,
                                          CUstream_st* stream) {
  CUgraphNode_st* node = nullptr;
  // A mem-alloc node: the call returns its fixed address; nothing is charged until a launch.
  auto r = StreamWork(
      stream, false,
      [&](NodeData* d) {
        if (dptr == nullptr || size == 0) return CUDA_ERROR_INVALID_VALUE;
        if (pool != nullptr && !ValidPool(pool)) return CUDA_ERROR_INVALID_VALUE;
        d->type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
        d->alloc = new GraphAlloc();
        d->alloc->size = size;
        d->alloc->device = pool != nullptr ? pool->device : stream->ctx->device;
        return CUDA_SUCCESS;
      },
      &node);
  if (r && *r == CUDA_SUCCESS) *dptr = node->data.alloc->base;
  return r;
}

std::optional<CUresult> GraphAwareFree(CUdeviceptr dptr, CUstream_st* stream) {
  if (stream == nullptr) {
    // cuMemFree is potentially unsafe during a capture.
    if (auto r = CaptureUnsafeCall()) return r;
  } else if (auto r = StreamWork(stream, false, [&](NodeData* d) {
               d->type = CU_GRAPH_NODE_TYPE_MEM_FREE;  // AddNodeLocked checks the address
               d->free_ptr = dptr;
               return CUDA_SUCCESS;
             })) {
    return r;
  }
  if (g_graph_allocs.load(std::memory_order_acquire) == 0) return std::nullopt;
  GraphAlloc* a = nullptr;
  {
    std::lock_guard lock(Graphs().mu);
    auto it = Graphs().allocs.find(dptr);
    if (it == Graphs().allocs.end()) return std::nullopt;  // not graph memory
    a = it->second;
    // Freed by a node of its own graph: it cannot be freed outside that graph.
    if (a->owner != nullptr && a->freed_by == a->owner) return CUDA_ERROR_INVALID_VALUE;
  }
  return stream == nullptr ? ReleaseGraphAlloc(a, false, CUPTI_INVALID_STREAM_ID)
                           : ReleaseGraphAlloc(a, true, stream->id);
}

std::optional<CUresult> CaptureEventRecord(CUevent_st* event, CUstream_st* stream) {
  if (EventsIdle()) return std::nullopt;
  GraphState& g = Graphs();
  std::lock_guard lock(g.mu);
  if (auto it = g.streams.find(stream); it != g.streams.end()) {
    Capture* c = it->second.capture;
    if (c->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    auto [slot, added] = g.events.try_emplace(event);
    if (added) g_captured_events.fetch_add(1, std::memory_order_release);
    slot->second = EventCapture{c, it->second.deps};
    return CUDA_SUCCESS;
  }
  if (LegacyWorkInvalidatesLocked(stream)) return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
  // Recorded outside any capture from now on.
  if (g.events.erase(event) != 0) g_captured_events.fetch_sub(1, std::memory_order_release);
  return std::nullopt;
}

std::optional<CUresult> CaptureWaitEvent(CUstream_st* stream, CUevent_st* event) {
  if (EventsIdle()) return std::nullopt;
  GraphState& g = Graphs();
  std::lock_guard lock(g.mu);
  auto sc = g.streams.find(stream);
  if (auto ev = g.events.find(event); ev != g.events.end()) {
    Capture* c = ev->second.capture;
    if (c->ended) return CUDA_ERROR_CAPTURED_EVENT;
    if (c->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    if (sc != g.streams.end()) {
      if (sc->second.capture != c) {  // two capture sequences would merge
        c->invalidated = true;
        sc->second.capture->invalidated = true;
        return CUDA_ERROR_STREAM_CAPTURE_MERGE;
      }
      // Join: the stream's next node depends on the event's nodes too.
      for (CUgraphNode_st* n : ev->second.deps) {
        auto& deps = sc->second.deps;
        if (std::find(deps.begin(), deps.end(), n) == deps.end()) deps.push_back(n);
      }
      sc->second.edges.assign(sc->second.deps.size(), CUgraphEdgeData{});
      return CUDA_SUCCESS;
    }
    if (IsLegacy(stream)) {  // the legacy stream cannot take part in a capture
      c->invalidated = true;
      return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    }
    // Fork: the stream joins the capture, depending on the event's nodes.
    StreamCapture joined;
    joined.capture = c;
    joined.deps = ev->second.deps;
    joined.edges.assign(joined.deps.size(), CUgraphEdgeData{});
    g.streams.emplace(stream, std::move(joined));
    c->streams.push_back(stream);
    return CUDA_SUCCESS;
  }
  if (sc != g.streams.end()) {
    Capture* c = sc->second.capture;
    if (c->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    // An event recorded outside the capture would cross its boundary; one never recorded is a
    // no-op wait.
    if (event->recorded.load(std::memory_order_acquire)) {
      c->invalidated = true;
      return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
    }
    return CUDA_SUCCESS;
  }
  if (LegacyWorkInvalidatesLocked(stream)) return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
  return std::nullopt;
}

std::optional<CUresult> CaptureEventUse(CUevent_st* event) {
  if (g_captured_events.load(std::memory_order_acquire) == 0) return std::nullopt;
  std::lock_guard lock(Graphs().mu);
  if (Graphs().events.count(event) != 0) return CUDA_ERROR_CAPTURED_EVENT;
  return std::nullopt;
}

std::optional<CUresult> CaptureStreamSync(CUstream_st* stream) { return RefuseInCapture(stream); }

std::optional<CUresult> CaptureStreamCallback(CUstream_st* stream) {
  return RefuseInCapture(stream);
}

std::optional<CUresult> CaptureGraphLaunch(CUstream_st* stream) {
  return RefuseInCapture(stream);  // a child graph node for a launch is not simulated
}

std::optional<CUresult> CaptureContextSync(CUctx_st* ctx) {
  if (Idle()) return std::nullopt;
  std::lock_guard lock(Graphs().mu);
  std::vector<Capture*> in_ctx;
  for (const auto& [stream, sc] : Graphs().streams) {
    if (stream->ctx == ctx) AddUnique(&in_ctx, sc.capture);
  }
  if (in_ctx.empty()) return std::nullopt;
  InvalidateAll(in_ctx);
  return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

std::optional<CUresult> CaptureUnsafeCall() {
  if (Idle()) return std::nullopt;
  std::lock_guard lock(Graphs().mu);
  const auto why = ProhibitingLocked();
  if (why.empty()) return std::nullopt;
  InvalidateAll(why);
  return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

CUresult BeginCapture(CUstream stream, bool per_thread, CUstreamCaptureMode mode, CUgraph into,
                      const CUgraphNode* deps, const CUgraphEdgeData* edges, size_t count) {
  CUstream_st* s = nullptr;
  if (CUresult r = ResolveStream(stream, per_thread, &s); r != CUDA_SUCCESS) return r;
  // Not on the legacy stream, not on a stream already capturing.
  if (!ValidMode(mode) || IsLegacy(s)) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = ValidateEdges(edges, count); r != CUDA_SUCCESS) return r;
  if (count > 0 && deps == nullptr) return CUDA_ERROR_INVALID_VALUE;
  GraphState& g = Graphs();
  GraphEvents events;
  {
    std::lock_guard lock(g.mu);
    if (g.streams.count(s) != 0) return CUDA_ERROR_INVALID_VALUE;
    std::vector<CUgraphNode_st*> start;
    CUgraph_st* graph = into;
    if (into != nullptr) {
      if (!UserGraphLocked(into) || into->capture != nullptr) return CUDA_ERROR_INVALID_VALUE;
      for (size_t i = 0; i < count; ++i) {
        CUgraphNode_st* d = deps[i];
        if (d == nullptr || g.nodes.count(d) == 0 || d->graph != into ||
            std::find(start.begin(), start.end(), d) != start.end()) {
          return CUDA_ERROR_INVALID_VALUE;
        }
        start.push_back(d);
      }
    } else {
      if (count != 0) return CUDA_ERROR_INVALID_VALUE;
      graph = NewGraphLocked(false);
      CUpti_GraphData created{};
      created.graph = graph;
      events.Add(CUPTI_CBID_RESOURCE_GRAPH_CREATED, created);
    }
    auto* c = new Capture();  // never freed (retired when it ends)
    c->id = g.next_capture_id++;
    c->graph = graph;
    c->owns_graph = into == nullptr;
    c->origin = s;
    c->ctx = s->ctx;
    c->mode = mode;
    c->thread = SelfId();
    c->streams.push_back(s);
    StreamCapture sc;
    sc.capture = c;
    sc.deps = std::move(start);
    sc.edges.assign(sc.deps.size(), CUgraphEdgeData{});
    g.streams.emplace(s, std::move(sc));
    g.captures.push_back(c);
    graph->capture = c;
    g_open_captures.fetch_add(1, std::memory_order_release);
  }
  events.Emit();
  return CUDA_SUCCESS;
}

CUresult EndCapture(CUstream stream, bool per_thread, CUgraph* out) {
  CUstream_st* s = nullptr;
  if (CUresult r = ResolveStream(stream, per_thread, &s); r != CUDA_SUCCESS) return r;
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  GraphState& g = Graphs();
  GraphEvents events;
  CUgraph_st* destroy = nullptr;
  CUresult result = CUDA_SUCCESS;
  {
    std::lock_guard lock(g.mu);
    auto it = g.streams.find(s);
    if (it == g.streams.end()) return CUDA_ERROR_INVALID_VALUE;  // not capturing
    Capture* c = it->second.capture;
    if (s != c->origin) {  // a forked stream cannot end the capture
      c->invalidated = true;
      return CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
    }
    if (c->mode != CU_STREAM_CAPTURE_MODE_RELAXED && c->thread != SelfId()) {
      return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
    }
    if (c->invalidated) {
      result = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    } else {
      // Every forked stream must have been joined back into the origin stream.
      std::unordered_set<CUgraphNode_st*> joined;
      AncestorsLocked(it->second.deps, &joined);
      for (CUstream_st* other : c->streams) {
        for (CUgraphNode_st* n : g.streams.at(other).deps) {
          if (joined.count(n) == 0) result = CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
        }
      }
    }
    for (CUstream_st* member : c->streams) g.streams.erase(member);
    c->ended = true;
    g.captures.erase(std::find(g.captures.begin(), g.captures.end(), c));
    g.retired.push_back(c);  // events recorded in it may still point at it
    g_open_captures.fetch_sub(1, std::memory_order_release);
    c->graph->capture = nullptr;
    if (result == CUDA_SUCCESS) {
      *out = c->graph;
    } else {
      *out = nullptr;
      if (c->owns_graph) {
        destroy = c->graph;
        DestroyGraphPhase1Locked(destroy, &events);
      }
    }
  }
  events.Emit();
  if (destroy != nullptr) {
    std::lock_guard lock(g.mu);
    DestroyGraphPhase2Locked(destroy);
  }
  return result;
}

CUresult IsCapturing(CUstream stream, bool per_thread, CUstreamCaptureStatus* status) {
  return GetCaptureInfo(stream, per_thread, status, nullptr, nullptr, nullptr, nullptr, nullptr);
}

CUresult GetCaptureInfo(CUstream stream, bool per_thread, CUstreamCaptureStatus* status,
                        cuuint64_t* id, CUgraph* graph, const CUgraphNode** deps,
                        const CUgraphEdgeData** edges, size_t* count) {
  CUstream_st* s = nullptr;
  if (CUresult r = ResolveStream(stream, per_thread, &s); r != CUDA_SUCCESS) return r;
  if (status == nullptr || (edges != nullptr && deps == nullptr)) return CUDA_ERROR_INVALID_VALUE;
  GraphState& g = Graphs();
  std::lock_guard lock(g.mu);
  auto it = g.streams.find(s);
  if (it == g.streams.end()) {
    // The legacy stream while a blocking stream captures: an error, the capture continues.
    if (IsLegacy(s) && !BlockingCapturesLocked(s->ctx).empty()) {
      return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    }
    *status = CU_STREAM_CAPTURE_STATUS_NONE;
    return CUDA_SUCCESS;
  }
  StreamCapture& sc = it->second;
  if (sc.capture->invalidated) {
    *status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
    return CUDA_SUCCESS;
  }
  *status = CU_STREAM_CAPTURE_STATUS_ACTIVE;
  if (id != nullptr) *id = sc.capture->id;
  if (graph != nullptr) *graph = sc.capture->graph;
  // Valid until the next call that operates on the stream, as documented.
  if (deps != nullptr) *deps = sc.deps.data();
  if (edges != nullptr) *edges = sc.edges.data();
  if (count != nullptr) *count = sc.deps.size();
  return CUDA_SUCCESS;
}

CUresult ExchangeCaptureMode(CUstreamCaptureMode* mode) {
  if (CUresult r = RequireInit(); r != CUDA_SUCCESS) return r;
  if (mode == nullptr || !ValidMode(*mode)) return CUDA_ERROR_INVALID_VALUE;
  std::swap(*mode, t_mode);
  return CUDA_SUCCESS;
}

}  // namespace gwsim::drv
