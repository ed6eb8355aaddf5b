/*
 * gpuwatch public C API.
 *
 * gpuwatch attaches to a CUDA program without code changes (LD_PRELOAD or
 * CUDA_INJECTION64_PATH). These functions let a program talk to it when it is
 * there: ask whether it is active, and write a report on demand. Every function
 * is safe to call when gpuwatch failed to attach (it then does nothing), from
 * any thread, and from C, C++ or Python ctypes. None of them is
 * async-signal-safe.
 */
#ifndef GPUWATCH_GPUWATCH_H_
#define GPUWATCH_GPUWATCH_H_

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define GPUWATCH_API __attribute__((visibility("default")))
#else
#define GPUWATCH_API
#endif

/* The library version as "MAJOR.MINOR.PATCH". Never NULL. */
GPUWATCH_API const char* gpuwatch_version(void);

/* 1 when gpuwatch is subscribed to CUPTI and recording, 0 otherwise. */
GPUWATCH_API int gpuwatch_is_active(void);

/*
 * Writes a snapshot report now, next to the main report with the suffix
 * ".snapshot-N" (see docs/report-format.md). `label` (may be NULL) is stored in
 * the report. Returns 0 on success, -1 when gpuwatch is inactive or the file
 * could not be written (one warning line says why).
 */
GPUWATCH_API int gpuwatch_snapshot(const char* label);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GPUWATCH_GPUWATCH_H_ */
