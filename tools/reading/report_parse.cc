#include "tools/reading/report_parse.h"

#include <cstddef>
#include <string>
#include <utility>

#include "libgpuwatch/report/report_schema.h"
#include "tools/reading/report_validate.h"

namespace gpuwatch::tools {

using nlohmann::json;

namespace {

// json::parse's document builder, but for the elements of the top-level
// trace's "events": each event, an array of scalars, is read into one small
// array, reused, and handed to the TraceEventReader. `depth_` counts the
// containers open; the root object is depth 1, the trace 2, its events 3.
class Handler {
 public:
  Handler(json* doc, TraceEventReader* events, ReportFieldReader* reader)
      : dom_(*doc), events_(events), reader_(reader) {}

  bool null() { return Value(nullptr); }
  bool boolean(bool v) { return Value(v); }
  bool number_integer(json::number_integer_t v) { return Value(v); }
  bool number_unsigned(json::number_unsigned_t v) { return Value(v); }
  bool number_float(json::number_float_t v, const std::string& /*text*/) { return Value(v); }
  bool string(std::string& v) {
    if (events_depth_ == 0) return dom_.string(v);
    if (v.size() > kMaxReportString && depth_ == events_depth_ + 1) {
      // The validator's limit on every string (report_validate.h).
      reader_->Fail(ReportFieldReader::Element(
                        ReportFieldReader::Element("trace.events", events_seen_), event_.size()),
                    "is a string of " + std::to_string(v.size()) + " bytes (at most " +
                        std::to_string(kMaxReportString) + ")");
    }
    return Value(v);
  }
  bool binary(json::binary_t& v) { return dom_.binary(v); }

  bool key(std::string& k) {
    if (events_depth_ != 0) return true;  // inside an event: an object, refused anyway
    if (depth_ == 1) key_is_trace_ = k == report_key::kTrace;
    if (depth_ == trace_depth_) key_is_events_ = k == "events";
    return dom_.key(k);
  }

  bool start_object(std::size_t n) { return Open(json::value_t::object, n); }
  bool start_array(std::size_t n) { return Open(json::value_t::array, n); }
  bool end_object() { return Close(false); }
  bool end_array() { return Close(true); }

  template <class Exception>
  bool parse_error(std::size_t at, const std::string& token, const Exception& e) {
    return dom_.parse_error(at, token, e);  // throws, as json::parse
  }

 private:
  // A scalar: in the document, an event's element, or (directly in the
  // events array) an event that is not an array.
  template <typename T>
  bool Value(T&& v) {
    if (events_depth_ == 0) return DomValue(std::forward<T>(v));
    if (depth_ == events_depth_) {
      events_->Read(json(std::forward<T>(v)));
      ++events_seen_;
    } else if (depth_ == events_depth_ + 1 && event_.is_array()) {
      event_.push_back(std::forward<T>(v));
    }
    return true;
  }

  bool DomValue(std::nullptr_t) { return dom_.null(); }
  bool DomValue(bool v) { return dom_.boolean(v); }
  bool DomValue(json::number_integer_t v) { return dom_.number_integer(v); }
  bool DomValue(json::number_unsigned_t v) { return dom_.number_unsigned(v); }
  bool DomValue(json::number_float_t v) { return dom_.number_float(v, ""); }
  bool DomValue(std::string& v) { return dom_.string(v); }

  bool Open(json::value_t type, std::size_t n) {
    const bool array = type == json::value_t::array;
    if (events_depth_ != 0) {
      if (depth_ == events_depth_) {  // an event; one that is an object is refused
        if (array && event_.is_array()) {
          event_.clear();  // keeps its storage: events are read without allocating it again
        } else {
          event_ = json(type);
        }
      } else if (depth_ == events_depth_ + 1 && event_.is_array()) {
        event_.push_back(json(type));  // refused as an element; its contents are skipped
      }
      ++depth_;
      return true;
    }
    const bool ok = array ? dom_.start_array(n) : dom_.start_object(n);
    ++depth_;
    if (!array && depth_ == 2 && key_is_trace_) trace_depth_ = 2;
    if (array && trace_depth_ != 0 && depth_ == trace_depth_ + 1 && key_is_events_) {
      events_depth_ = depth_;
    }
    return ok;
  }

  bool Close(bool array) {
    --depth_;
    if (events_depth_ != 0 && depth_ >= events_depth_) {
      if (depth_ == events_depth_) {  // an event ends
        events_->Read(event_);
        ++events_seen_;
      }
      return true;
    }
    events_depth_ = 0;  // when it was open, the events array ends: empty in the document
    if (depth_ < trace_depth_) trace_depth_ = 0;
    return array ? dom_.end_array() : dom_.end_object();
  }

  nlohmann::detail::json_sax_dom_parser<json> dom_;
  TraceEventReader* events_;
  ReportFieldReader* reader_;
  int depth_ = 0;
  int trace_depth_ = 0;   // the trace object's depth while it is open
  int events_depth_ = 0;  // its events array's while it is open
  bool key_is_trace_ = false;
  bool key_is_events_ = false;
  json event_;  // the event being read
  size_t events_seen_ = 0;
};

}  // namespace

void TraceEventsParser::Parse(const std::string& text, json* doc) {
  Handler handler(doc, &event_reader_, &reader_);
  json::sax_parse(text, &handler);
}

bool TraceEventsParser::MoveTo(ReportTrace* trace) {
  event_reader_.MoveTo(trace);
  event_reader_.Resolve();
  return !reader_.failed();
}

}  // namespace gpuwatch::tools
