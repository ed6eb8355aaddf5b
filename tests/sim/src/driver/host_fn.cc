// Host functions (cuLaunchHostFunc, cuStreamAddCallback, host nodes): as on a GPU they run on a
// thread of the driver's, not the caller's. The simulator completes all work before a call
// returns, so the submitting call waits for the function to finish; the order of work stays
// deterministic. CUDA must not be called from a host function: every traced API called on that
// thread returns CUDA_ERROR_NOT_PERMITTED (cudaErrorNotPermitted).
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "common/leaked.h"
#include "driver/graph_internal.h"
#include "driver/trace.h"

namespace gwsim::drv {

namespace {

thread_local bool t_host_thread = false;

struct Job {
  const std::function<void()>* fn = nullptr;
  bool done = false;
};

// One worker, started on first use and never stopped (it waits for work while the process
// exits, like the rest of the driver's state).
class HostThread {
 public:
  void Run(const std::function<void()>& fn) {
    Job job;
    job.fn = &fn;
    std::unique_lock lock(mu_);
    if (!started_) {
      std::thread([this] { Loop(); }).detach();
      started_ = true;
    }
    queue_.push_back(&job);
    work_.notify_one();
    done_.wait(lock, [&job] { return job.done; });
  }

 private:
  void Loop() {
    t_host_thread = true;
    std::unique_lock lock(mu_);
    for (;;) {
      work_.wait(lock, [this] { return !queue_.empty(); });
      Job* job = queue_.front();
      queue_.pop_front();
      lock.unlock();
      (*job->fn)();
      lock.lock();
      job->done = true;
      done_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable work_;
  std::condition_variable done_;
  std::deque<Job*> queue_;
  bool started_ = false;
};

HostThread& Worker() { return Leaked<HostThread>(); }  // never destroyed

}  // namespace

bool InHostFunction() { return t_host_thread; }

void RunOnHostThread(const std::function<void()>& job) { Worker().Run(job); }

CUresult LaunchHostFunc(CUstream stream, bool per_thread, CUhostFn fn, void* data) {
  CUstream_st* s = nullptr;
  if (CUresult r = ResolveStream(stream, per_thread, &s); r != CUDA_SUCCESS) return r;
  if (fn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (auto r = CaptureHostFunc(s, fn, data)) return *r;  // a host node
  RunOnHostThread([fn, data] { fn(data); });
  return CUDA_SUCCESS;
}

CUresult StreamAddCallback(CUstream stream, bool per_thread, CUstreamCallback callback, void* data,
                           unsigned flags) {
  CUstream_st* s = nullptr;
  if (CUresult r = ResolveStream(stream, per_thread, &s); r != CUDA_SUCCESS) return r;
  if (callback == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  // Unlike cuLaunchHostFunc, not supported by stream capture.
  if (auto r = CaptureStreamCallback(s)) return *r;
  // The stream as passed (NULL stays NULL), and the status of the stream's earlier work.
  RunOnHostThread([callback, stream, data] { callback(stream, CUDA_SUCCESS, data); });
  return CUDA_SUCCESS;
}

}  // namespace gwsim::drv

GWSIM_EXPORT int gwsim_in_host_function(void) { return gwsim::drv::InHostFunction() ? 1 : 0; }
