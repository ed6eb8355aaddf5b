// Calls the gpuwatch API as a program linked against the installed library
// does: the calls must work (as no-ops returning -1) when gpuwatch is not
// attached, and take effect when it is (LD_PRELOAD, `gpuwatch run`). One
// device allocation is left live, so that an attached gpuwatch reports a leak
// at the line marked below.
#include <cuda_runtime.h>
#include <gpuwatch/gpuwatch.h>

#include <cstdio>

int main() {
  void* buffer = nullptr;
  if (cudaMalloc(&buffer, 1 << 20) != cudaSuccess) {  // CONSUMER:leak
    std::fprintf(stderr, "consumer: cudaMalloc failed\n");
    return 3;
  }
  const int mark = gpuwatch_mark("step");
  const int snapshot = gpuwatch_snapshot("consumer");
  const int paused = gpuwatch_pause();
  const int resumed = gpuwatch_resume();
  std::printf("version %s active %d mark %d snapshot %d pause %d resume %d\n", gpuwatch_version(),
              gpuwatch_is_active(), mark, snapshot, paused, resumed);
  return 0;
}
