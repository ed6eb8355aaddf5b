// What a checkpoint keeps of its report's text for the next checkpoint of
// the process, so that a checkpoint re-makes only the text of what changed
// (issue 33; docs/BENCHMARKS.md, stop 47): the frame table's rows, by their
// index in the resolver's kept frame table (SiteResolver::KeepFrameTable:
// within one process a frame keeps its index from the checkpoint that first
// listed it) and the trace's `sites` rows by site id (a site's id and
// location do not change while the resolver lives). The text is exactly
// what the document would print (DumpReport): a checkpoint's bytes are a
// from-scratch report's of the same snapshot with the same frame numbering.
// Exit, signal, OOM and on-demand reports keep nothing: they are built from
// scratch and their frame tables list only the frames their sections name.
#ifndef GPUWATCH_LIBGPUWATCH_REPORT_CHECKPOINT_TEXT_H_
#define GPUWATCH_LIBGPUWATCH_REPORT_CHECKPOINT_TEXT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "libgpuwatch/symbolize/symbolizer.h"

namespace gpuwatch {

struct ReportTraceSite;

class CheckpointText {
 public:
  // For the kept frame table of the resolver whose serial() is `resolver`:
  // text kept for another resolver is dropped (a library was unloaded and
  // the resolver made anew: its table numbers frames from 0 again).
  void UseFor(uint64_t resolver);

  // Makes the rows of the frames appended to `table` (the resolver's kept
  // frame table) since the last call; a row is never made twice.
  void AddFrames(const std::vector<const Frame*>& table);
  // Makes the rows of the trace sites not seen before.
  void AddTraceSites(const std::vector<ReportTraceSite>& sites);

  // Frame `i`'s row, as the frame table prints it (one line, no indent).
  const std::string& frame(size_t i) const { return frames_[i]; }
  size_t frames() const { return frames_.size(); }
  // The trace's `sites` value of `sites` (each made by AddTraceSites).
  void AppendTraceSites(const std::vector<ReportTraceSite>& sites, std::string* out) const;

  // Bytes of text kept (for docs/BENCHMARKS.md's memory per site).
  size_t bytes() const;

  // The event count (EventCountOf) and device peak of the snapshot the
  // last checkpoint was made from: what the next look compares with
  // (CheckpointDue), so that an event counted while it was made is not
  // taken for a change it already holds, nor one it lacks for written.
  void MadeFrom(uint64_t events, uint64_t device_peak) {
    events_ = events;
    peak_ = device_peak;
  }
  uint64_t events() const { return events_; }
  uint64_t peak() const { return peak_; }

 private:
  uint64_t resolver_ = 0;
  uint64_t events_ = 0;
  uint64_t peak_ = 0;
  std::vector<std::string> frames_;
  std::vector<std::string> trace_sites_;  // by site id; "" not made yet
};

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_REPORT_CHECKPOINT_TEXT_H_
