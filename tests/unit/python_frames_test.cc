// Unit tests of the Python frame table (python_frames.h) and of the merge of
// native and Python frames (mixed_stack.h), on synthetic frames. The capture
// itself needs a running interpreter and is tested end to end
// (tests/e2e/python_test.cc).
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "libgpuwatch/stacks/python_frames.h"
#include "libgpuwatch/symbolize/mixed_stack.h"

namespace gpuwatch {
namespace {

TEST(PythonTokens, EncodeIdAndEntryAboveAnyUserSpacePc) {
  const uintptr_t token = MakePythonToken(42, true);
  EXPECT_TRUE(IsPythonToken(token));
  EXPECT_TRUE(PythonTokenIsEntry(token));
  EXPECT_EQ(PythonTokenId(token), 42u);
  EXPECT_FALSE(PythonTokenIsEntry(MakePythonToken(42, false)));
  EXPECT_FALSE(IsPythonToken(0x00007fffffffffffULL));  // the top of user space
}

TEST(PyFrameTable, InsertFindGet) {
  PyFrameTable table(100, 1 << 20);
  const PyFrameKey key{0x1000, 12, 7};
  EXPECT_EQ(table.Find(key), 0u);
  const uint32_t id = table.Insert(key, "/src/train.py", "Trainer.step", 31);
  ASSERT_NE(id, 0u);
  EXPECT_EQ(table.Find(key), id);
  EXPECT_EQ(table.Insert(key, "ignored", "ignored", 1), id);  // stored once
  PyFrameInfo info;
  ASSERT_TRUE(table.Get(id, &info));
  EXPECT_EQ(info.file, "/src/train.py");
  EXPECT_EQ(info.function, "Trainer.step");
  EXPECT_EQ(info.line, 31);
  EXPECT_FALSE(table.Get(0, &info));
  EXPECT_FALSE(table.Get(id + 1, &info));
}

TEST(PyFrameTable, KeysDifferingInOffsetOrCheckAreDistinct) {
  PyFrameTable table(100, 1 << 20);
  const uint32_t a = table.Insert({0x1000, 12, 7}, "a.py", "f", 1);
  const uint32_t b = table.Insert({0x1000, 14, 7}, "a.py", "f", 2);
  // Same address, another code object (its name or file changed): the check
  // word differs, so a reused address never reads as the old frame.
  const uint32_t c = table.Insert({0x1000, 12, 8}, "b.py", "g", 9);
  EXPECT_NE(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(b, c);
  PyFrameInfo info;
  ASSERT_TRUE(table.Get(c, &info));
  EXPECT_EQ(info.file, "b.py");
}

TEST(PyFrameTable, FullTableDropsAndLongStringsAreTruncated) {
  PyFrameTable table(2, 1 << 20);
  const std::string long_name(5000, 'x');
  const uint32_t id = table.Insert({0x10, 0, 0}, long_name, "f", 1);
  PyFrameInfo info;
  ASSERT_TRUE(table.Get(id, &info));
  EXPECT_EQ(info.file.size(), PyFrameTable::kMaxString);
  EXPECT_NE(table.Insert({0x20, 0, 0}, "b.py", "g", 1), 0u);
  EXPECT_EQ(table.Insert({0x30, 0, 0}, "c.py", "h", 1), 0u);
  EXPECT_EQ(table.dropped(), 1u);
  EXPECT_EQ(table.size(), 2u);
}

TEST(PyFrameTable, ConcurrentInsertsOfTheSameKeysAgree) {
  PyFrameTable table(10000, 4 << 20);
  std::vector<std::vector<uint32_t>> ids(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (uintptr_t code = 1; code <= 2000; ++code) {
        const PyFrameKey key{code * 64, static_cast<int32_t>(code % 7), 3};
        uint32_t id = table.Find(key);
        if (id == 0) id = table.Insert(key, "f.py", "fn", static_cast<int>(code));
        ids[t].push_back(id);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(table.size(), 2000u);
  for (int t = 1; t < 4; ++t) EXPECT_EQ(ids[t], ids[0]);
}

// --- Merging -----------------------------------------------------------------

Frame Native(const std::string& function, const std::string& module, int line = 0) {
  Frame f;
  f.function = function;
  f.module = module;
  f.line = line;
  if (line > 0) f.file = function + ".c";
  return f;
}

Frame Py(const std::string& function, const std::string& file, int line) {
  Frame f;
  f.function = function;
  f.file = file;
  f.line = line;
  f.module = std::string(kPythonModule);
  return f;
}

NativeUnit Unit(NativeKind kind, std::vector<Frame> frames) { return {kind, std::move(frames)}; }

std::vector<std::string> Names(const std::vector<Frame>& frames) {
  std::vector<std::string> out;
  for (const Frame& f : frames) out.push_back(f.function);
  return out;
}

const char kLibpython[] = "/usr/lib/libpython3.11.so.1.0";

// python -> ctypes -> cudaMalloc, with the eval loop running two Python
// frames per C-level call (3.11+) and CPython call machinery around.
std::vector<NativeUnit> CtypesStack() {
  return {
      Unit(NativeKind::kOther, {Native("gpuwatch::CaptureSite", "/x/libgpuwatch.so")}),
      Unit(NativeKind::kOther, {Native("cuptiCallback", "/x/libcupti.so.13")}),
      Unit(NativeKind::kOther, {Native("cudaMalloc", "/x/libcudart.so.13")}),
      Unit(NativeKind::kOther, {Native("", "/lib/libffi.so.8")}),
      Unit(NativeKind::kOther, {Native("ffi_call", "/lib/libffi.so.8")}),
      Unit(NativeKind::kOther,
           {Native("_ctypes_callproc", "/py/_ctypes.cpython-311-x86_64-linux-gnu.so", 1262)}),
      Unit(NativeKind::kInterpreter, {Native("_PyObject_MakeTpCall", kLibpython, 214)}),
      Unit(NativeKind::kEvalLoop, {Native("_PyEval_EvalFrameDefault", kLibpython, 4769)}),
      Unit(NativeKind::kInterpreter,
           {Native("_PyEval_EvalFrame", kLibpython, 73), Native("_PyEval_Vector", kLibpython, 1)}),
      Unit(NativeKind::kOther, {Native("numpy_apply", "/py/numpy/_multiarray.so", 10)}),
      Unit(NativeKind::kEvalLoop, {Native("_PyEval_EvalFrameDefault", kLibpython, 5000)}),
      Unit(NativeKind::kInterpreter, {Native("Py_RunMain", kLibpython, 680)}),
      Unit(NativeKind::kOther, {Native("__libc_start_main", "/lib/libc.so.6", 1)}),
  };
}

TEST(MergeMixedStack, EvalLoopCallsAreReplacedByTheirPythonFramesInCallOrder) {
  const std::vector<std::vector<Frame>> groups = {
      {Py("inner", "/src/t.py", 5), Py("outer", "/src/t.py", 9)},
      {Py("<module>", "/src/t.py", 12)},
  };
  const std::vector<Frame> merged = MergeMixedStack(CtypesStack(), groups);
  EXPECT_EQ(Names(merged), (std::vector<std::string>{"inner", "outer", "numpy_apply", "<module>",
                                                     "__libc_start_main"}));
}

TEST(MergeMixedStack, PythonFramesBeyondACutNativeStackFollowIt) {
  std::vector<NativeUnit> units = CtypesStack();
  units.resize(8);  // GPUWATCH_DEPTH cut it after the first eval loop call
  const std::vector<std::vector<Frame>> groups = {
      {Py("inner", "/src/t.py", 5)}, {Py("outer", "/src/t.py", 9)}, {Py("<module>", "t.py", 1)}};
  EXPECT_EQ(Names(MergeMixedStack(units, groups)),
            (std::vector<std::string>{"inner", "outer", "<module>"}));
}

TEST(MergeMixedStack, WithoutARecognisedEvalLoopPythonFramesGoWhereTheInterpreterStarts) {
  std::vector<NativeUnit> units = CtypesStack();
  for (NativeUnit& u : units) {
    if (u.kind == NativeKind::kEvalLoop) u.kind = NativeKind::kInterpreter;
  }
  const std::vector<std::vector<Frame>> groups = {{Py("inner", "t.py", 5)},
                                                  {Py("main", "t.py", 9)}};
  EXPECT_EQ(Names(MergeMixedStack(units, groups)),
            (std::vector<std::string>{"inner", "main", "numpy_apply", "__libc_start_main"}));
}

TEST(MergeMixedStack, NativeCodeAboveThePythonFramesIsKept) {
  // torch-like: Python -> a C++ extension -> its allocator -> cudaMalloc.
  const std::vector<NativeUnit> units = {
      Unit(NativeKind::kOther, {Native("cudaMalloc", "/x/libcudart.so.13")}),
      Unit(NativeKind::kOther, {Native("c10::cuda::Alloc", "/py/torch/lib/libc10_cuda.so")}),
      Unit(NativeKind::kOther, {Native("THPVariable_add", "/py/torch/lib/libtorch_python.so")}),
      Unit(NativeKind::kEvalLoop, {Native("_PyEval_EvalFrameDefault", kLibpython)}),
  };
  const std::vector<Frame> merged =
      MergeMixedStack(units, {{Py("forward", "/venv/lib/python3.11/site-packages/m.py", 3),
                               Py("train_step", "/home/u/train.py", 42)}});
  EXPECT_EQ(Names(merged), (std::vector<std::string>{"c10::cuda::Alloc", "THPVariable_add",
                                                     "forward", "train_step"}));
  // The site is the user's line, not the library's nor the allocator's
  // (which has no line information here).
  const Frame* site = SiteFrame(merged);
  ASSERT_NE(site, nullptr);
  EXPECT_EQ(site->function, "train_step");
}

TEST(MergeMixedStack, WithoutPythonFramesNoBridgeFrameIsTrimmed) {
  const std::vector<Frame> merged = MergeMixedStack(CtypesStack(), {});
  ASSERT_FALSE(merged.empty());
  EXPECT_EQ(merged.front().module, "/lib/libffi.so.8");  // no Python frame: nothing bridged
}

TEST(SiteFrame, FirstFrameWithALineOrTheInnermostUserPythonFrame) {
  EXPECT_EQ(SiteFrame({}), nullptr);
  EXPECT_EQ(SiteFrame({Native("f", "/lib/a.so")}), nullptr);
  const std::vector<Frame> native = {Native("f", "/lib/a.so"), Native("g", "/bin/app", 7)};
  EXPECT_EQ(SiteFrame(native)->function, "g");
  // A library Python frame first: the user's frame further out names the site.
  const std::vector<Frame> library = {
      Py("Thread.run", "/usr/lib/python3.11/threading.py", 982),
      Py("work", "/home/u/job.py", 4),
  };
  EXPECT_EQ(SiteFrame(library)->function, "work");
  // Only library frames: the innermost one.
  const std::vector<Frame> only_library = {Py("a", "<frozen importlib._bootstrap>", 1),
                                           Py("b", "/venv/lib/python3.9/site-packages/x.py", 2)};
  EXPECT_EQ(SiteFrame(only_library)->function, "a");
}

TEST(IsLibraryPythonFile, StandardLibraryPackagesAndFrozenModules) {
  EXPECT_TRUE(IsLibraryPythonFile("/usr/lib/python3.11/threading.py"));
  EXPECT_TRUE(IsLibraryPythonFile("/root/.pyenv/versions/3.8.18/lib/python3.8/ctypes/__init__.py"));
  EXPECT_TRUE(IsLibraryPythonFile("/usr/lib64/python3.12/threading.py"));
  EXPECT_TRUE(IsLibraryPythonFile("/venv/lib/python3.11/site-packages/torch/nn/modules/module.py"));
  EXPECT_TRUE(IsLibraryPythonFile("/usr/lib/python3/dist-packages/numpy/core/numeric.py"));
  EXPECT_TRUE(IsLibraryPythonFile("<frozen importlib._bootstrap>"));
  EXPECT_FALSE(IsLibraryPythonFile("/home/u/train.py"));
  EXPECT_FALSE(IsLibraryPythonFile("train.py"));
  EXPECT_FALSE(IsLibraryPythonFile("/home/u/python3.11/train.py"));
  EXPECT_FALSE(IsLibraryPythonFile("<string>"));
}

}  // namespace
}  // namespace gpuwatch
