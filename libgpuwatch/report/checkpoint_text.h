// What a checkpoint keeps of its report's text for the next checkpoint of
// the process, so that a checkpoint re-makes only the text of what changed
// (issue 33; docs/BENCHMARKS.md, stop 47): the frame table's rows, by their
// index in the resolver's kept frame table (SiteResolver::KeepFrameTable:
// within one process a frame keeps its index from the checkpoint that first
// listed it), the trace's `sites` rows by site id (a site's id and
// location do not change while the resolver lives), and the rows of the
// `leaks`, `peak` and `sites` lists with a key of the row each was made
// from (a row whose key equals the last checkpoint's row of its site keeps
// its text). The text is exactly
// what the document would print (DumpReport): a checkpoint's bytes are a
// from-scratch report's of the same snapshot with the same frame numbering.
// Exit, signal, OOM and on-demand reports keep nothing: they are built from
// scratch and their frame tables list only the frames their sections name.
#ifndef GPUWATCH_LIBGPUWATCH_REPORT_CHECKPOINT_TEXT_H_
#define GPUWATCH_LIBGPUWATCH_REPORT_CHECKPOINT_TEXT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "libgpuwatch/report/checkpoint_trace.h"
#include "libgpuwatch/report/report_model.h"
#include "libgpuwatch/symbolize/symbolizer.h"

namespace gpuwatch {

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

  // Takes the rows of `m`'s leaks, peak and sites lists (leaving the lists
  // empty for ToJson), keeping the text of every row equal to the last
  // checkpoint's row of its site and making the others; rows the report
  // no longer lists are dropped.
  void TakeRows(ReportModel* m);
  // Puts a marker (a discarded value: `<discarded>`, which no JSON value
  // prints, at the start of a line) for each non-empty list taken in `doc`.
  void MarkRows(nlohmann::json* doc) const;
  // Replaces the markers in `head`, DumpReport's text of `doc`, with the
  // rows' text; false (the head left as it was) when they are not where
  // MarkRows put them.
  bool SpliceRows(std::string* head) const;
  // The rows TakeRows took, put back in `m` (no markers then).
  void GiveRowsBack(ReportModel* m);
  // Drops the rows as listed now once the report is written: only the kept
  // rows and their text stay (not each row twice) until the next checkpoint.
  void ReleaseRows();
  bool rows_taken() const { return rows_taken_; }

  // Bytes of text kept (for docs/BENCHMARKS.md's memory per site).
  size_t bytes() const;

  // The event count (EventCountOf) and device peak of the snapshot the
  // last checkpoint was made from: what the next look compares with
  // (CheckpointDue), so that an event counted while it was made is not
  // taken for a change it already holds, nor one it lacks for written.
  void MadeFrom(uint64_t events, uint64_t device_peak) {
    made_events_ = events;
    made_peak_ = device_peak;
  }
  uint64_t events() const { return made_events_; }
  uint64_t peak() const { return made_peak_; }

  // The lines of the trace's events, reused from the last checkpoint's file.
  CheckpointTrace& trace_lines() { return trace_lines_; }

 private:
  // What is kept of a listed row: its key (every field it prints but the
  // site's location and stack, the site's own while the resolver lives,
  // encoded compactly: RowKey) and its text as the list prints it (indented,
  // so that the splice copies it whole). Not the row itself:
  // its strings, stack and vectors kept for 3,000 rows cost 6 B per live
  // allocation at 1,000,000 live (docs/BENCHMARKS.md, stop 47).
  // The rows kept between checkpoints, packed once the report is written:
  // each list's keys and texts in one block (a mapping of its own, so that
  // it pins no page of the heap the report used and freed), found by site.
  // While a checkpoint is made, its rows' keys and texts are in `made`, one
  // buffer per list (no allocation per row).
  struct PackedRows {
    struct Entry {
      uint64_t site = 0;
      size_t at = 0;  // the key's offset in `bytes`, the text right after it
      uint32_t key_size = 0;
      uint32_t text_size = 0;
    };
    std::vector<Entry> entries;  // by site
    // A mapping of its own (text only, no pointers): never among the heap
    // pages a report uses and frees, so it pins none of them.
    class Block {
     public:
      Block() = default;
      explicit Block(size_t size);
      ~Block();
      Block(Block&& other) noexcept;
      Block& operator=(Block&& other) noexcept;
      Block(const Block&) = delete;
      Block& operator=(const Block&) = delete;
      char* data() { return data_; }
      std::string_view view() const { return {data_, size_}; }
      size_t size() const { return size_; }

     private:
      char* data_ = nullptr;
      size_t size_ = 0;
    };
    Block bytes;
    std::string made;  // while a checkpoint is made: the entries' bytes
    const Entry* Find(uint64_t site) const;
  };
  // A list's rows as listed now, what this checkpoint made or kept of each
  // (by site), and what is kept for the next.
  template <typename T>
  struct Rows {
    std::vector<T> now;
    PackedRows made;
    PackedRows kept;
  };
  Rows<LeakSite> leaks_[3];  // device, host, ipc_imported
  Rows<PeakSite> peak_;
  Rows<AllocSite> sites_;
  // A list named one site twice (with different rows): not spliced.
  bool twice_ = false;
  bool rows_taken_ = false;

  uint64_t resolver_ = 0;
  uint64_t made_events_ = 0;
  uint64_t made_peak_ = 0;
  std::vector<std::string> frames_;
  std::vector<std::string> trace_sites_;  // by site id; "" not made yet
  CheckpointTrace trace_lines_;
};

}  // namespace gpuwatch

#endif  // GPUWATCH_LIBGPUWATCH_REPORT_CHECKPOINT_TEXT_H_
