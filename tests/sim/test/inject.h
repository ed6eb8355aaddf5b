// What the test injection library (inject.cc) counted, for tests that load it through
// CUDA_INJECTION64_PATH and read it back with dlopen(RTLD_NOLOAD) + dlsym("gwsim_inject_stats").
#ifndef GWSIM_TEST_INJECT_H_
#define GWSIM_TEST_INJECT_H_

struct GwsimInjectStats {
  int initialize_calls;
  int cu_init_finished;
  int contexts_created;
  int destroy_starting;
  int runtime_enter;
  int runtime_exit;
  int exit_without_enter;  // runtime EXITs whose ENTER the library never saw
  int first_runtime_cbid;  // -1 until the first runtime callback
  int first_runtime_site;  // CUpti_ApiCallbackSite of that callback, or -1
  int launches;            // runtime launch callbacks that carried a symbol name
};

typedef const GwsimInjectStats* (*GwsimInjectStatsFn)(void);

#endif  // GWSIM_TEST_INJECT_H_
