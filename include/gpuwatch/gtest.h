/*
 * gpuwatch for GoogleTest: a listener that fails the test that leaves device
 * memory live. Header-only: it finds gpuwatch's C API in the process at run
 * time, so a test binary needs neither to link libgpuwatch nor to change when
 * it runs without gpuwatch (then the listener does nothing).
 *
 * The one line to add to a test main(), after InitGoogleTest:
 *
 *   #include <gpuwatch/gtest.h>
 *
 *   int main(int argc, char** argv) {
 *     ::testing::InitGoogleTest(&argc, argv);
 *     gpuwatch::AddLeakListener();  // or AddLeakListener(max_leak_bytes)
 *     return RUN_ALL_TESTS();
 *   }
 *
 * and run the binary under gpuwatch: `gpuwatch run -- ./my_tests` (or
 * LD_PRELOAD=libgpuwatch.so). A test that leaves more than max_leak_bytes of
 * device memory live fails, and the failure names the bytes and the sites that
 * allocated them, `file:line (function)` with their callers:
 *
 *   my_tests.cc:20: Failure
 *   gpuwatch: Leaks.OneMiB left 1.0 MiB of device memory live (1048576 bytes),
 *   more than 0 B allowed
 *     1.0 MiB in 1 allocation at my_tests.cc:20 (Leaks_OneMiB_Test::TestBody())
 *
 * What a test leaves live: device memory allocated from its start (after its
 * suite's SetUpTestSuite) to its end (after the fixture's TearDown) and still
 * live then, of every thread. Memory gpuwatch puts in a built-in category
 * (library workspaces, caching allocators) or a suppressions file matches is
 * kept on purpose and does not count unless include_kept. A test that already
 * failed or was skipped is not judged.
 */
#ifndef GPUWATCH_GTEST_H_
#define GPUWATCH_GTEST_H_

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace gpuwatch {
namespace gtest_detail {

// A JSON value: enough of JSON to read gpuwatch_live_since()'s answer.
struct Json {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type = Type::kNull;
  uint64_t number = 0;  // integers (gpuwatch writes no other numbers here)
  std::string text;
  std::vector<Json> items;        // an array's, or an object's values
  std::vector<std::string> keys;  // an object's keys, one per item

  const Json& operator[](const char* key) const {
    static const Json kNone;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (keys[i] == key) return items[i];
    }
    return kNone;
  }
};

class JsonReader {
 public:
  explicit JsonReader(const std::string& text) : s_(text) {}

  bool Read(Json* out) {
    if (!Value(out, 0)) return false;
    Space();
    return i_ == s_.size();
  }

 private:
  void Space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r'))
      ++i_;
  }
  bool Take(char c) {
    Space();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  bool Word(const char* w) {
    const std::string word(w);
    if (s_.compare(i_, word.size(), word) != 0) return false;
    i_ += word.size();
    return true;
  }
  bool String(std::string* out) {
    if (!Take('"')) return false;
    while (i_ < s_.size() && s_[i_] != '"') {
      char c = s_[i_++];
      if (c == '\\') {
        if (i_ >= s_.size()) return false;
        c = s_[i_++];
        if (c == 'n') c = '\n';
        if (c == 't') c = '\t';
        if (c == 'r') c = '\r';
        if (c == 'b') c = '\b';
        if (c == 'f') c = '\f';
        if (c == 'u') {  // gpuwatch escapes control characters only
          if (i_ + 4 > s_.size()) return false;
          c = static_cast<char>(std::strtoul(s_.substr(i_, 4).c_str(), nullptr, 16) & 0x7f);
          i_ += 4;
        }
      }
      out->push_back(c);
    }
    return Take('"');
  }
  // After an opening bracket: items separated by commas, up to `close`.
  template <typename Item>
  bool Sequence(char close, Item item) {
    ++i_;
    if (Take(close)) return true;
    do {
      if (!item()) return false;
    } while (Take(','));
    return Take(close);
  }
  bool Value(Json* out, int depth) {
    if (depth > 32) return false;
    Space();
    if (i_ >= s_.size()) return false;
    const char c = s_[i_];
    if (c == '{') {
      out->type = Json::Type::kObject;
      return Sequence('}', [&] {
        out->keys.emplace_back();
        out->items.emplace_back();
        return String(&out->keys.back()) && Take(':') && Value(&out->items.back(), depth + 1);
      });
    }
    if (c == '[') {
      out->type = Json::Type::kArray;
      return Sequence(']', [&] {
        out->items.emplace_back();
        return Value(&out->items.back(), depth + 1);
      });
    }
    if (c == '"') {
      out->type = Json::Type::kString;
      return String(&out->text);
    }
    if (c >= '0' && c <= '9') {
      out->type = Json::Type::kNumber;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
        out->number = out->number * 10 + static_cast<uint64_t>(s_[i_++] - '0');
      }
      return true;
    }
    if (Word("true") || Word("false")) {
      out->type = Json::Type::kBool;
      out->number = c == 't';
      return true;
    }
    return Word("null");
  }

  const std::string& s_;
  size_t i_ = 0;
};

// Sizes as gpuwatch's reports write them ("512 B", "1.5 MiB"; libgpuwatch's
// FormatBytes, which this header cannot include: it stands alone).
inline std::string FormatBytes(uint64_t bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f %s", value, kUnits[unit]);
  return buf;
}

// gpuwatch's C API (include/gpuwatch/gpuwatch.h), found in the process.
struct Api {
  uint64_t (*point)() = nullptr;
  long (*live_since)(uint64_t, char*, size_t) = nullptr;  // NOLINT(google-runtime-int): the C API's
  int (*not_recording)(char*, size_t) = nullptr;          // null in a gpuwatch before it

  // With LD_PRELOAD (gpuwatch run) gpuwatch is in the global scope; with
  // CUDA_INJECTION64_PATH alone the driver loads it, once CUDA has started.
  bool Find() {
    if (point != nullptr) return true;
    void* handle = RTLD_DEFAULT;
    void* p = dlsym(handle, "gpuwatch_point");
    const char* injected = std::getenv("CUDA_INJECTION64_PATH");  // NOLINT(concurrency-mt-unsafe)
    if (p == nullptr && injected != nullptr && *injected != '\0') {
      handle = dlopen(injected, RTLD_NOW | RTLD_NOLOAD);  // never loads it
      if (handle != nullptr) p = dlsym(handle, "gpuwatch_point");
    }
    void* q = p != nullptr ? dlsym(handle, "gpuwatch_live_since") : nullptr;
    if (q == nullptr) return false;
    point = reinterpret_cast<uint64_t (*)()>(p);
    live_since =
        reinterpret_cast<long (*)(uint64_t, char*, size_t)>(q);  // NOLINT(google-runtime-int)
    not_recording =
        reinterpret_cast<int (*)(char*, size_t)>(dlsym(handle, "gpuwatch_not_recording"));
    return true;
  }

  // Why gpuwatch, loaded, does not record this process; "" while it records.
  std::string NotRecording() const {
    char why[512] = {};
    return not_recording != nullptr && not_recording(why, sizeof(why)) == 1 ? why : "";
  }

  // What was allocated after `since` and is live, parsed; false when
  // gpuwatch is inactive or its answer could not be read.
  bool LiveSince(uint64_t since, Json* out) const {
    std::string text(1 << 16, '\0');
    for (int attempt = 0; attempt < 4; ++attempt) {
      const long n = live_since(since, &text[0], text.size());  // NOLINT(google-runtime-int)
      if (n < 0) return false;
      if (static_cast<size_t>(n) < text.size()) {
        text.resize(static_cast<size_t>(n));
        if (JsonReader(text).Read(out)) return true;
        static bool said = false;
        if (!said) {
          said = true;
          std::fprintf(stderr,
                       "gpuwatch: gtest.h could not read gpuwatch_live_since()'s answer (a newer "
                       "gpuwatch?): its leak listener checks nothing\n");
        }
        return false;
      }
      text.assign(static_cast<size_t>(n) + 1, '\0');  // the live set grew: ask again
    }
    return false;
  }
};

}  // namespace gtest_detail

// Fails a test that leaves more than `max_leak_bytes` of device memory live
// (outside memory kept on purpose, unless `include_kept`), naming the sites.
// When gpuwatch is loaded but does not record the process (CUPTI held by
// another profiler), each test fails saying so, since nothing was measured;
// `allow_off` makes that one line on stderr instead.
class LeakListener : public ::testing::EmptyTestEventListener {
 public:
  static constexpr uint64_t kStartPoint = 1;  // gpuwatch_point()'s start (gpuwatch.h)

  explicit LeakListener(uint64_t max_leak_bytes = 0, bool include_kept = false,
                        bool allow_off = false)
      : max_leak_bytes_(max_leak_bytes), include_kept_(include_kept), allow_off_(allow_off) {}

  void OnTestStart(const ::testing::TestInfo& /*info*/) override {
    if (api_.Find()) {
      start_ = api_.point();
    } else {
      // With CUDA_INJECTION64_PATH the driver may load gpuwatch during the
      // test: then everything it records is the test's (the start's point).
      const char* injected = std::getenv("CUDA_INJECTION64_PATH");  // NOLINT(concurrency-mt-unsafe)
      start_ = injected != nullptr && *injected != '\0' ? kStartPoint : 0;
    }
  }

  void OnTestEnd(const ::testing::TestInfo& info) override {
    const uint64_t start = start_;
    start_ = 0;
    const ::testing::TestResult* result = info.result();
    if (start == 0 || result == nullptr || result->Failed() || result->Skipped()) return;
    if (!api_.Find()) return;
    if (const std::string off = api_.NotRecording(); !off.empty()) {
      if (!allow_off_) {
        ADD_FAILURE_AT(info.file() != nullptr ? info.file() : "", info.line())
            << "gpuwatch is loaded but not recording: " << off << "; no test is judged";
      } else if (!said_off_) {
        said_off_ = true;
        std::fprintf(stderr, "gpuwatch: loaded but not recording: %s (nothing is measured)\n",
                     off.c_str());
      }
      return;
    }
    gtest_detail::Json since;
    if (!api_.LiveSince(start, &since)) return;
    const gtest_detail::Json& device = since["device"];
    const uint64_t left = include_kept_ ? device["bytes"].number : device["leaked_bytes"].number;
    if (left <= max_leak_bytes_) return;
    std::string message = "gpuwatch: " + std::string(info.test_suite_name()) + "." + info.name() +
                          " left " + gtest_detail::FormatBytes(left) + " of device memory live (" +
                          std::to_string(left) + " bytes), more than " +
                          gtest_detail::FormatBytes(max_leak_bytes_) + " allowed";
    const char* file = info.file();
    int line = info.line();
    int shown = 0;
    for (const gtest_detail::Json& site : device["sites"].items) {
      const bool kept = !site["category"].text.empty() || !site["suppressed"].text.empty();
      if (kept && !include_kept_) continue;
      if (shown++ == 3) {
        message += "\n  and more sites";
        break;
      }
      const std::vector<gtest_detail::Json>& frames = site["frames"].items;
      const uint64_t count = site["count"].number;
      message += "\n  " + gtest_detail::FormatBytes(site["bytes"].number) + " in " +
                 std::to_string(count) + (count == 1 ? " allocation" : " allocations") + " at " +
                 site["location"].text;
      if (!frames.empty()) message += " (" + frames[0]["function"].text + ")";
      if (!kept && shown == 1 && !frames.empty() && !frames[0]["file"].text.empty()) {
        file = frames[0]["file"].text.c_str();  // the failure points at the leak
        line = static_cast<int>(frames[0]["line"].number);
      }
      for (size_t f = 1; f < frames.size() && f < 8; ++f) {
        const std::string& function = frames[f]["function"].text;
        if (function.find("testing::internal::") != std::string::npos) break;  // GoogleTest's
        const std::string& where = frames[f]["file"].text;
        message += "\n      <- " + function;
        if (!where.empty())
          message += " (" + where + ":" + std::to_string(frames[f]["line"].number) + ")";
      }
    }
    ADD_FAILURE_AT(file != nullptr ? file : "", line) << message;
  }

 private:
  gtest_detail::Api api_;
  uint64_t max_leak_bytes_;
  bool include_kept_;
  bool allow_off_;
  bool said_off_ = false;
  uint64_t start_ = 0;
};

// Adds a LeakListener to GoogleTest's listeners: the one line for main(),
// after ::testing::InitGoogleTest(). GoogleTest owns and deletes it.
inline void AddLeakListener(uint64_t max_leak_bytes = 0, bool include_kept = false,
                            bool allow_off = false) {
  ::testing::UnitTest::GetInstance()->listeners().Append(
      new LeakListener(max_leak_bytes, include_kept, allow_off));
}

}  // namespace gpuwatch

#endif  // GPUWATCH_GTEST_H_
