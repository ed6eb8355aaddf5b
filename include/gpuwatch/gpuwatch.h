/*
 * gpuwatch public C API.
 *
 * gpuwatch attaches to a CUDA program without code changes (LD_PRELOAD or
 * CUDA_INJECTION64_PATH). These functions let a program talk to it when it is
 * there: ask whether it is active, write a report on demand, mark iterations
 * for growth detection, pause and resume recording. A program that must also
 * run without gpuwatch can declare them weak, look them up with
 * dlsym(RTLD_DEFAULT, "gpuwatch_mark"), or, from Python, use
 * ctypes.CDLL(None) (examples/mark_iterations.py). Every function
 * is safe to call when gpuwatch failed to attach (it then does nothing), from
 * any thread, and from C, C++ or Python ctypes. None of them is
 * async-signal-safe.
 */
#ifndef GPUWATCH_GPUWATCH_H_
#define GPUWATCH_GPUWATCH_H_

#include <stddef.h>
#include <stdint.h>

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
 * 1 when gpuwatch is loaded but does not record this process (it tried to
 * attach and could not: CUPTI held by another tool such as Nsight Systems, no
 * usable driver, GPUWATCH_DISABLE=1; or CUPTI was detached under it), with
 * the reason copied into `why` (NUL-terminated, cut to `size`; may be NULL).
 * 0 while it records, and before the process's first CUDA call. A gate
 * (a per-test leak check, a CI job) must not pass what was not recorded.
 */
GPUWATCH_API int gpuwatch_not_recording(char* why, size_t size);

/*
 * Writes a snapshot report now, next to the main report with the suffix
 * ".snapshot-N" (see docs/report-format.md). `label` (may be NULL) is stored in
 * the report. Returns 0 on success, -1 when gpuwatch is inactive or the file
 * could not be written (one warning line says why).
 */
GPUWATCH_API int gpuwatch_snapshot(const char* label);

/*
 * Records a mark: a phase or iteration boundary, such as the end of a
 * training step. gpuwatch samples the device bytes live per allocation site
 * at each mark, and the report lists as growth suspects the sites whose bytes
 * keep rising from mark to mark, with the rate in bytes per mark, even when
 * the memory is freed before exit (see "growth" in docs/report-format.md).
 * `label` (may be NULL) is kept with the sample. Cheap enough to call once
 * per iteration: it reads one counter per site and takes no CUDA call.
 * Returns 0, or -1 when gpuwatch is inactive.
 */
GPUWATCH_API int gpuwatch_mark(const char* label);

/*
 * Pauses and resumes recording. While paused, new allocations, copies and
 * kernel launches are not recorded; frees still are, so that memory allocated
 * before the pause and freed during it is not reported as leaked (memory
 * allocated during the pause and freed after it counts as an unknown free).
 * Not nested: one resume ends any number of pauses. Called before gpuwatch
 * attaches (the process's first CUDA call, under Python), the last of them
 * holds from the attach on. Returns 0, or -1 when gpuwatch is disabled
 * (GPUWATCH_DISABLE).
 */
GPUWATCH_API int gpuwatch_pause(void);
GPUWATCH_API int gpuwatch_resume(void);

/*
 * Opens and closes a phase on the calling thread, as NVTX's
 * nvtxRangePushA/nvtxRangePop do (the same stack: the two may be mixed).
 * Allocations, copies and launches are reported by the path of phases open
 * on their thread ("step/forward"); see "phases" in docs/report-format.md.
 * Works before gpuwatch attaches (before the first CUDA call). Nothing is
 * allocated after a name's first push. Returns 0; -1 when gpuwatch is
 * disabled, or for a pop with no phase open.
 */
GPUWATCH_API int gpuwatch_phase_push(const char* name);
GPUWATCH_API int gpuwatch_phase_pop(void);

/*
 * Memory live now, as gpuwatch recorded it: the bytes and the number of
 * allocations of `kind` on device `device`. `kind` is a memory kind's report
 * name ("device", "pool", "managed", "vmm", "array", "graph", "pinned_host",
 * "registered_host", "vmm_imported", "ipc_imported"; docs/report-format.md), "host" for both
 * host kinds, or NULL or "" for every device kind together; `device` is a device ordinal, or
 * -1 for every device. `bytes` and `count` may be NULL. Returns 0, or -1 (and
 * 0 in both) when gpuwatch is inactive or `kind` is unknown. Every device:
 * counters only, no lock (about 0.1 us). One device: a walk of gpuwatch's
 * table of live allocations, about 4 ms per million of them
 * (docs/BENCHMARKS.md).
 */
GPUWATCH_API int gpuwatch_live(const char* kind, int device, uint64_t* bytes, uint64_t* count);

/*
 * A point in the program's allocations, for asking later what was allocated
 * after it and is still live (a test's leak: take a point when the test
 * starts, ask when it ends). Returns a handle (never 0); before gpuwatch is
 * active (no CUDA call yet), the handle of the start, 1, before every
 * allocation it will record (code that runs before the CUDA driver loads
 * gpuwatch through CUDA_INJECTION64_PATH may use 1 for a point taken before
 * then). Also starts the window whose device peak
 * gpuwatch_live_since() reports.
 * Exact for any number of points, unless more than 128 are taken within one
 * millisecond.
 */
GPUWATCH_API uint64_t gpuwatch_point(void);
/*
 * What was allocated after `point` (gpuwatch_point()) and is still live, as
 * JSON: {"device": LEAKS, "host": LEAKS, "window_peak_bytes": N}, each LEAKS
 * a leaks section as reports write it (docs/report-format.md: bytes, count,
 * leaked_bytes after categories and suppressions, and its sites, largest
 * first, each with its location, frames, category and suppression rule), and
 * window_peak_bytes the device bytes' peak since the newest point. Writes the
 * text and its terminating NUL into `json` when `size` is larger than the
 * text, and returns the text's length either way (as snprintf: call again
 * with a larger buffer when it is `size` or more; `json` may be NULL to ask).
 * Returns -1 when gpuwatch is inactive or `point` is 0. Walks the live
 * allocations and symbolizes the sites it lists, under the lock reports
 * take: not for a hot loop.
 */
GPUWATCH_API long gpuwatch_live_since(uint64_t point, char* json, size_t size);

/*
 * Hands gpuwatch PyTorch's caching-allocator view (its segments and the
 * blocks in them, each live block with its Python frames), as the JSON
 * object docs/report-format.md describes under "torch_blocks" (`len` bytes,
 * no NUL needed). gpuwatch keeps the latest copy and puts it into every
 * report written after, each segment matched by address to the gpuwatch
 * site that allocated it. `gpuwatch run --torch-blocks` calls it from Python
 * (python/gpuwatch/torch_blocks.py); docs/pytorch.md. Returns 0 when the
 * copy was kept, -1 when it was refused (not JSON, a field of the wrong type,
 * over 64 MiB; one warning line says which), keeping the previous copy.
 */
GPUWATCH_API int gpuwatch_torch_blocks(const char* json, size_t len);

/*
 * PyTorch's counters when it raised torch.cuda.OutOfMemoryError, from its
 * out-of-memory observer (python/gpuwatch/torch_blocks.py registers one):
 * `allocated` and `reserved` bytes on `device` (torch.cuda.memory_stats()'s
 * allocated_bytes.all.current and reserved_bytes.all.current). Call it on the
 * thread whose allocation failed, before the error reaches Python: gpuwatch
 * adds them, as the oom.torch member, to the out-of-memory report that
 * failure wrote (docs/report-format.md) and writes that report again.
 * Returns 0 when a report will carry them, -1 when none can: gpuwatch is
 * inactive, this thread's last CUDA allocation failure wrote no report (one
 * of ten reports already written, or another device's), or it ran out of
 * memory.
 */
GPUWATCH_API int gpuwatch_torch_oom(int device, uint64_t allocated, uint64_t reserved);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GPUWATCH_GPUWATCH_H_ */
