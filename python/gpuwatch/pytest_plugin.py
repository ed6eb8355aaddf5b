"""pytest plugin: device memory per test, and a gate on what each test leaks.

Under gpuwatch (`gpuwatch run -- python -m pytest ...`, which puts this
plugin on PYTEST_PLUGINS, or LD_PRELOAD=libgpuwatch.so with the package
pip-installed or `-p gpuwatch.pytest_plugin`):

    --gpuwatch                   a summary: per test, the device memory it left
                                 live and the peak it needed, largest first
    --gpuwatch-max-leak=BYTES    fail every test that leaves more than BYTES of
                                 device memory live (0, 512KiB, 1.5MiB, 2GiB)
    --gpuwatch-include-kept      count memory kept on purpose as leaked too
    --gpuwatch-allow-off         when gpuwatch is loaded but does not record
                                 (CUPTI held by another tool), warn instead of
                                 failing the tests it was asked to judge

    @pytest.mark.gpuwatch(max_leak="1MiB", max_peak="4GiB", include_kept=False)
                                 limits for one test (or a class or module
                                 through pytestmark), over the options
    @pytest.mark.limit_gpu_memory("24 MB")
                                 pytest-memray's limit_memory for device
                                 memory: the same as max_peak (its units: KB,
                                 MB, GB are 1024-based there and here)

What a test leaves live: the device memory allocated from the start of its
setup to the end of its teardown and still live then, less what fixtures of a
wider scope (module, session, ...) allocated while they were set up for it:
a model a session fixture loads does not count against the first test that
asks for it. Memory gpuwatch puts in a built-in category (caching allocators,
library workspaces) or that a suppressions file matches is kept on purpose
and does not count unless include_kept asks. Judged only when the test's
setup and call passed (a failing test's traceback keeps its locals alive),
after a garbage collection when the first measure is over the limit. The
verdict comes after teardown and is the test's failure, reported with its
call, once (gpuwatch.pytest_verdict); the summary line names the test, the
bytes and the largest site.

The peak is the most device memory the test needed above what was live when
its call started, from then to the end of its teardown. Memory is all device memory of the process,
every thread's: work a background thread does during a test counts for it.

Under PyTorch's caching allocator (torch imported and its CUDA initialised,
the native backend, PYTORCH_NO_CUDA_MEMORY_CACHING not 1) gpuwatch sees the
allocator's segments, kept on purpose, not tensors: a tensor a test keeps may
sit in a segment made before it, and a test that frees every tensor leaves
its segments cached. There the plugin counts what PyTorch's tensors hold: a
test leaves live the growth of torch.cuda.memory_allocated() over its window
(plus what gpuwatch saw allocated outside PyTorch), and its peak is the
growth of torch.cuda.max_memory_allocated(), whose peak it resets when the
call begins. Before each test it judges for leaks it empties PyTorch's cache
(torch.cuda.empty_cache()), and again before it names the sites of a leak,
so that the segments still live then are those holding the kept tensors,
named by the line that made them. Before a second measure it also lets go of
cuBLAS's workspaces, under any allocator, as PyTorch's own leak check does.

Without gpuwatch the options warn once that nothing is measured, and the
suite runs as it would. With gpuwatch loaded but not recording (CUPTI held by
Nsight Systems or another profiler, no usable driver, CUPTI detached under
it) every test it was asked to judge fails with "gpuwatch is loaded but not
recording: WHY", so that a gate never passes what was not measured, unless
--gpuwatch-allow-off turns that into one warning.
"""

import gc
import os

import pytest

import gpuwatch
from gpuwatch import pytest_torch, pytest_verdict
from gpuwatch.sizes import format_bytes, parse_bytes

_START = 1  # gpuwatch_point()'s handle of the start (include/gpuwatch/gpuwatch.h)
_FRAMES_SHOWN = 8  # frames of a leaking site's stack in a failure, at most
_RUNNER_PATHS = ("/_pytest/", "/pluggy/")  # frames from here on are pytest's
_SITES_SHOWN = 3  # leaking sites in a failure
_SUMMARY_ROWS = 30  # tests in the --gpuwatch summary
_MARKER = "gpuwatch(max_leak=None, max_peak=None, include_kept=False): gpuwatch's device " \
          "memory limits for this test: bytes it may leave live, bytes its call may need at " \
          "its peak (an int, or text such as '512KiB', '1.5GiB')"
_LIMIT_MARKER = "limit_gpu_memory(limit): fail the test if its call needs more than limit of " \
                "device memory at its peak (pytest-memray's limit_memory for the device; " \
                "'24 MB', '1.5 GiB', or an int)"


class GpuwatchWarning(pytest.PytestWarning):
    """gpuwatch's options were given and nothing can be measured."""


def _size_option(text):
    import argparse  # pytest's parser is argparse's: its message names the option
    try:
        return parse_bytes(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e))


def pytest_addoption(parser):
    group = parser.getgroup("gpuwatch", "device memory per test (gpuwatch)")
    group.addoption("--gpuwatch", action="store_true", default=False,
                    help="summary of the device memory each test left live and its peak, "
                         "largest first (under gpuwatch)")
    group.addoption("--gpuwatch-max-leak", metavar="BYTES", type=_size_option, default=None,
                    help="fail every test that leaves more than BYTES of device memory live "
                         "(0, 512KiB, 1.5MiB, ...)")
    group.addoption("--gpuwatch-include-kept", action="store_true", default=False,
                    help="count memory kept on purpose (gpuwatch's built-in categories, the "
                         "suppressions file) as leaked too")
    group.addoption("--gpuwatch-allow-off", action="store_true", default=False,
                    help="when gpuwatch is loaded but does not record (CUPTI held by another "
                         "tool), warn instead of failing the tests it was asked to judge")
    group.addoption("--gpuwatch-torch-blocks", action="store_true", default=False,
                    help="put PyTorch's allocator blocks, with their Python lines, into "
                         "gpuwatch's reports (as gpuwatch run --torch-blocks)")


def pytest_configure(config):
    config.addinivalue_line("markers", _MARKER)
    config.addinivalue_line("markers", _LIMIT_MARKER)
    gate = _Gate(config)
    config.pluginmanager.register(gate, "gpuwatch-gate")
    config.pluginmanager.register(gate.verdict, "gpuwatch-verdict")


class _Limits:
    __slots__ = ("max_leak", "max_peak", "include_kept", "leak_from", "peak_from")

    def __init__(self, config, marker, limit_marker=None):
        self.max_leak = config.getoption("gpuwatch_max_leak")
        self.leak_from = "--gpuwatch-max-leak"
        self.max_peak = None
        self.peak_from = None
        self.include_kept = config.getoption("gpuwatch_include_kept")
        if marker is not None:
            self._gpuwatch_marker(marker)
        if limit_marker is not None:  # the closer marker's peak, as pytest-memray's wins
            if len(limit_marker.args) != 1 or limit_marker.kwargs:
                raise ValueError("takes one limit, as limit_gpu_memory('24 MB')")
            self.max_peak = parse_bytes(limit_marker.args[0])
            self.peak_from = "@pytest.mark.limit_gpu_memory(%r)" % (limit_marker.args[0],)

    def _gpuwatch_marker(self, marker):
        if marker.args:
            raise ValueError("takes keywords only (max_leak=, max_peak=, include_kept=)")
        unknown = set(marker.kwargs) - {"max_leak", "max_peak", "include_kept"}
        if unknown:
            raise ValueError("unknown argument %s (max_leak=, max_peak=, include_kept=)" %
                             ", ".join(sorted(unknown)))
        if "max_leak" in marker.kwargs:
            value = marker.kwargs["max_leak"]
            self.max_leak = None if value is None else parse_bytes(value)
            self.leak_from = "@pytest.mark.gpuwatch(max_leak=%r)" % (value,)
        if marker.kwargs.get("max_peak") is not None:
            self.max_peak = parse_bytes(marker.kwargs["max_peak"])
            self.peak_from = "@pytest.mark.gpuwatch(max_peak=%r)" % (marker.kwargs["max_peak"],)
        if "include_kept" in marker.kwargs:
            self.include_kept = bool(marker.kwargs["include_kept"])


class _Test:
    """What the plugin keeps of one test while it runs. A moment is a pair:
    gpuwatch's point, and the bytes PyTorch's tensors held then (0 where its
    caching allocator is not in use)."""
    __slots__ = ("limits", "start", "excluded", "fixture_depth", "call_point", "call_base",
                 "torch_call", "ran")

    def __init__(self, limits, point, torch_allocated):
        self.limits = limits
        self.start = (point, torch_allocated)
        self.excluded = []  # (before, after) moments of wider fixtures set up for it
        self.fixture_depth = 0
        self.call_point = None
        self.call_base = 0
        self.torch_call = None  # PyTorch's (allocated, reserved) when the call began
        self.ran = False  # setup and call passed


class _Failure:
    """A longrepr in pytest's manner: the text, and the one-line message the
    short summary shows."""

    class _Crash:
        def __init__(self, path, lineno, message):
            self.path, self.lineno, self.message = path, lineno, message

        def __str__(self):
            return "%s:%d: %s" % (self.path, self.lineno, self.message)

    def __init__(self, item, text, message):
        path, lineno, _ = item.location
        self.reprcrash = _Failure._Crash(path, (lineno or 0) + 1, message)
        self._text = text

    def toterminal(self, tw):
        for line in self._text.splitlines():
            tw.line(line, red=line.startswith("gpuwatch:"))

    def __str__(self):
        return self._text


class _Left:
    """What a test left live (_Gate._left_live): bytes, of which tensors
    are PyTorch's (its caching allocator's view), kept bytes, sites, and
    the device peak since the newest point."""
    __slots__ = ("bytes", "kept", "sites", "window_peak", "tensors")

    def __init__(self, nbytes, kept, sites, window_peak, tensors):
        self.bytes, self.kept, self.sites = nbytes, kept, sites
        self.window_peak, self.tensors = window_peak, tensors


def _site_key(site):
    return (site.get("location", "?"),
            tuple((f.get("function"), f.get("file"), f.get("line")) for f in site.get("frames", [])))


def _is_kept(site):
    return bool(site.get("category")) or bool(site.get("suppressed"))


class _Gate:
    def __init__(self, config):
        self._config = config
        self._summary = config.getoption("gpuwatch")
        self._asked = self._summary or config.getoption("gpuwatch_max_leak") is not None
        self._tests = {}  # nodeid -> _Test while it runs
        self._setup_of = None  # the _Test whose setup runs
        self._rows = []  # (left, kept, peak, nodeid, note) for the summary
        self._found = gpuwatch._find() is not None
        self._warned_off = False
        # With CUDA_INJECTION64_PATH alone, the driver loads gpuwatch when
        # CUDA starts: it may be found later.
        self._may_come = not self._found and bool(os.environ.get("CUDA_INJECTION64_PATH"))
        if self._asked and not self._found and not self._may_come:
            self._warn()
        self.verdict = pytest_verdict.Verdict(config, self.judges)

    def judges(self, item):
        """Whether the gate measures `item` (an option or a marker asks, and
        gpuwatch is attached or may attach when CUDA starts)."""
        return (self._asked or item.get_closest_marker("gpuwatch") is not None or
                item.get_closest_marker("limit_gpu_memory") is not None) and \
            (self._attached() or self._may_come)

    def _warn(self):
        self._config.issue_config_time_warning(
            GpuwatchWarning("gpuwatch is not attached to this process: --gpuwatch options "
                            "measure nothing (run the tests under `gpuwatch run --` or with "
                            "LD_PRELOAD=libgpuwatch.so)"), stacklevel=2)

    def _attached(self):
        if not self._found and self._may_come:
            self._found = gpuwatch._find() is not None
        return self._found

    def pytest_collection_modifyitems(self, session, config, items):
        for item in items:  # a bad marker stops the run before any test, naming it
            for name in ("gpuwatch", "limit_gpu_memory"):
                marker = item.get_closest_marker(name)
                if marker is None:
                    continue
                try:
                    _Limits(config, *((marker,) if name == "gpuwatch" else (None, marker)))
                except ValueError as e:
                    raise pytest.UsageError("%s: @pytest.mark.%s: %s" % (item.nodeid, name, e))

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_setup(self, item):
        if self.judges(item):
            limits = _Limits(self._config, item.get_closest_marker("gpuwatch"),
                             item.get_closest_marker("limit_gpu_memory"))
            cuda = pytest_torch.caching_cuda()
            if cuda is not None and limits.max_leak is not None:
                cuda.empty_cache()  # what the test keeps gets segments of its own, at its lines
            test = _Test(limits, gpuwatch.point() or _START, pytest_torch.allocated(cuda))
            self._tests[item.nodeid] = test
            self._setup_of = test
        yield
        self._setup_of = None

    @staticmethod
    def _moment():
        """Now, as _Test keeps a moment: gpuwatch's point and PyTorch's
        allocated bytes (0 where its caching allocator is not in use)."""
        return gpuwatch.point() or _START, pytest_torch.allocated(pytest_torch.caching_cuda())

    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(self, fixturedef, request):
        test = self._setup_of
        if test is None or fixturedef.scope == "function":
            yield
            return
        test.fixture_depth += 1
        # Not loaded yet (CUDA_INJECTION64_PATH): the start is before it.
        before = None
        if test.fixture_depth == 1:
            before = self._moment()
        try:
            yield
        finally:
            test.fixture_depth -= 1
            if before is not None:
                test.excluded.append((before, self._moment()))

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_call(self, item):
        # The peak's window: from here (before the test function runs) to
        # the end of the teardown.
        test = self._tests.get(item.nodeid)
        if test is not None and (self._summary or test.limits.max_peak is not None):
            cuda = pytest_torch.caching_cuda()
            if cuda is not None:
                test.torch_call = pytest_torch.peak_start(cuda)
            test.call_point = gpuwatch.point() or _START
            live = gpuwatch.live()
            test.call_base = live.bytes if live is not None else 0

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        test = self._tests.get(item.nodeid)
        if test is None:
            return
        if call.when == "setup":
            test.ran = report.passed
        elif call.when == "call":
            test.ran = test.ran and report.passed
        elif call.when == "teardown":
            del self._tests[item.nodeid]
            self._judge(item, test, report)

    def _judge(self, item, test, report):
        if not test.ran or not report.passed:
            report.gpuwatch = {"failed": False}
            return
        off = gpuwatch.not_recording()
        if off is not None:
            self._not_recorded(item, report, off)
            return
        limits = test.limits
        cuda = pytest_torch.caching_cuda()
        left = self._left_live(test, cuda)
        if limits.max_leak is not None and left.bytes > limits.max_leak:
            gc.collect()  # memory held only by garbage is not a leak
            pytest_torch.let_go()  # the segments still live then hold what is still allocated
            left = self._left_live(test, cuda)
        peak = self._peak(test, cuda, left.window_peak)
        failures = []
        if limits.max_leak is not None and left.bytes > limits.max_leak:
            failures.append(self._leak_failure(item, test, left))
        if limits.max_peak is not None and peak > limits.max_peak:
            failures.append(self._peak_failure(item, test, peak))
        report.gpuwatch = {"left": left.bytes, "kept": left.kept, "peak": peak,
                           "failed": bool(failures)}
        if failures:
            report.outcome = "failed"
            report.longrepr = _Failure(item, "\n".join(text for text, _ in failures),
                                       "; ".join(message for _, message in failures))

    @staticmethod
    def _peak(test, cuda, window_peak):
        """The most the test's call needed above what was live when it began:
        gpuwatch's device peak; under PyTorch's caching allocator, the growth
        of its tensors' peak plus what gpuwatch's peak holds beyond PyTorch's
        reserved growth (allocated outside PyTorch)."""
        if test.call_point is None:
            return None
        peak = max(0, window_peak - test.call_base)
        if cuda is None:
            return peak
        allocated, reserved = test.torch_call or (0, 0)  # None: CUDA began during the call
        tensors = max(0, pytest_torch.summed(cuda, "max_memory_allocated") - allocated)
        segments = max(0, pytest_torch.summed(cuda, "max_memory_reserved") - reserved)
        return tensors + max(0, peak - segments)

    def _not_recorded(self, item, report, why):
        """gpuwatch is loaded and does not record: nothing was measured, and
        the test fails unless --gpuwatch-allow-off says to warn."""
        text = "gpuwatch is loaded but not recording: %s" % why
        if self._config.getoption("gpuwatch_allow_off"):
            report.gpuwatch = {"failed": False}
            if not self._warned_off:
                self._warned_off = True
                reporter = self._config.pluginmanager.get_plugin("terminalreporter")
                if reporter is not None:
                    reporter.write_line("%s (nothing is measured: --gpuwatch-allow-off)" %
                                        text, yellow=True)
            return
        report.gpuwatch = {"failed": True}
        report.outcome = "failed"
        report.longrepr = _Failure(item, "gpuwatch: %s: %s; no test is judged (run it without "
                                         "the other profiler, or pass --gpuwatch-allow-off)" %
                                   (item.nodeid, text), "gpuwatch: " + text)

    def _left_live(self, test, cuda):
        """Device bytes allocated during the test and live now, outside the
        wider fixtures' setup: what is live since the start, less what is
        live since each such fixture began and plus since it ended, and the
        same of PyTorch's allocated bytes where its caching allocator is in
        use (cuda), in place of its segments. Sites [(bytes, count, site)]
        largest first, kept ones out unless the limits include them (or they
        are PyTorch's segments and its tensors grew), and window_peak, the
        device peak since the newest point (the call's)."""
        signed = [(test.start, 1)]
        for before, after in test.excluded:
            signed += [(before, -1), (after, 1)]
        leaked = kept = window_peak = tensors = 0
        by_site = {}
        for (point, allocated), sign in signed:
            tensors += sign * allocated
            since = gpuwatch.live_since(point)
            if since is None:
                continue
            window_peak = since["window_peak_bytes"]
            device = since["device"]
            leaked += sign * device["leaked_bytes"]
            kept += sign * (device["bytes"] - device["leaked_bytes"])
            for site in device["sites"]:
                entry = by_site.setdefault(_site_key(site), [0, 0, site])
                entry[0] += sign * site["bytes"]
                entry[1] += sign * site["count"]
        include_kept = test.limits.include_kept
        if cuda is None or include_kept:
            tensors = 0
        else:
            tensors = max(0, pytest_torch.allocated(cuda) - tensors)
        if include_kept:
            leaked, kept = leaked + kept, 0

        def shown(site):
            return include_kept or not _is_kept(site) or \
                (tensors > 0 and site.get("category") == "caching-allocator")

        sites = [tuple(e) for e in by_site.values() if e[0] > 0 and shown(e[2])]
        sites.sort(key=lambda e: -e[0])
        return _Left(max(0, leaked) + tensors, max(0, kept), sites, window_peak, tensors)

    def _where(self, frame):
        path = frame.get("file") or frame.get("module") or "?"
        try:
            rel = os.path.relpath(path, str(self._config.rootpath))
            path = rel if not rel.startswith("..") else path
        except (ValueError, AttributeError):
            pass
        return "%s:%d" % (path, frame.get("line", 0)) if frame.get("line") else path

    @staticmethod
    def _own(site):
        """The index of the site's own frame in its frames: the one its
        location names (below an allocator's native frames), else the first."""
        frames = site.get("frames", [])
        file, _, line = site.get("location", "").rpartition(":")
        for i, frame in enumerate(frames):
            if str(frame.get("line")) == line and file and \
                    os.path.basename(frame.get("file") or "") == file:
                return i
        return 0

    @staticmethod
    def _function(site):
        frames = site.get("frames", [])
        return frames[_Gate._own(site)].get("function", "?") if frames else "?"

    @staticmethod
    def _callers(site):
        """The frames below a site's own, up to the test runner's."""
        shown = []
        frames = site.get("frames", [])
        first = _Gate._own(site) + 1
        for frame in frames[first:first + _FRAMES_SHOWN - 1]:
            path = frame.get("file", "")
            if any(runner in path for runner in _RUNNER_PATHS):
                break
            shown.append(frame)
        return shown

    def _leak_failure(self, item, test, measure):
        limits, left, sites = test.limits, measure.bytes, measure.sites
        what = "device memory" + (" (kept memory included)" if limits.include_kept else "")
        lines = ["gpuwatch: %s left %s of %s live (%d bytes), more than %s allowed (%s)" %
                 (item.nodeid, format_bytes(left), what, left, format_bytes(limits.max_leak),
                  limits.leak_from)]
        if measure.tensors:
            segments = [s for s in sites if s[2].get("category") == "caching-allocator"]
            lines.append("  %s in PyTorch's tensors (torch.cuda.memory_allocated() grew by %d "
                         "bytes), %s" % (format_bytes(measure.tensors), measure.tensors,
                                         "in the segments below" if segments else
                                         "in segments made before the test: no line"))
        for nbytes, count, site in sites[:_SITES_SHOWN]:
            lines.append("  %s in %d allocation%s at %s (%s)" %
                         (format_bytes(nbytes), count, "" if count == 1 else "s",
                          site.get("location", "?"), self._function(site)))
            for frame in self._callers(site):
                lines.append("      <- %s (%s)" % (frame.get("function", "?"), self._where(frame)))
            if site.get("category"):
                lines.append("      (category %s)" % site["category"])
            if site.get("suppressed"):
                lines.append("      (suppressed by %s)" % site["suppressed"])
        if len(sites) > _SITES_SHOWN:
            rest = sum(s[0] for s in sites[_SITES_SHOWN:])
            lines.append("  and %s at %d more sites" % (format_bytes(rest),
                                                        len(sites) - _SITES_SHOWN))
        where = ""
        if sites:
            where = "; largest at %s (%s)" % (sites[0][2].get("location", "?"),
                                              self._function(sites[0][2]))
        message = "gpuwatch: left %s of device memory live, over %s%s" % (
            format_bytes(left), format_bytes(limits.max_leak), where)
        return "\n".join(lines), message

    @staticmethod
    def _peak_failure(item, test, peak):
        limits = test.limits
        text = ("gpuwatch: %s needed %s of device memory at its peak (%d bytes above what was "
                "live when its call began), more than %s allowed (%s)" %
                (item.nodeid, format_bytes(peak), peak, format_bytes(limits.max_peak),
                 limits.peak_from))
        message = "gpuwatch: peak %s of device memory, over %s" % (
            format_bytes(peak), format_bytes(limits.max_peak))
        return text, message

    def pytest_runtest_logreport(self, report):
        # From the reports, so that the summary also sees the tests that
        # pytest-xdist's workers ran.
        # The call's report carries them (pytest_verdict), else the teardown's.
        figures = getattr(report, "gpuwatch", None)
        if not figures:
            return
        self.verdict.count_once(report)
        self._rows.append((figures.get("left"), figures.get("kept", 0), figures.get("peak") or 0,
                           report.nodeid, "FAILED" if figures["failed"] else ""))

    def pytest_terminal_summary(self, terminalreporter):
        if not self._summary:
            return
        tr = terminalreporter
        tr.write_sep("=", "gpuwatch: device memory per test")
        if not self._attached():
            tr.write_line("gpuwatch is not attached to this process: nothing was measured")
            return
        off = gpuwatch.not_recording()
        if off is not None:
            tr.write_line("gpuwatch is loaded but not recording: %s: nothing was measured" % off)
            return
        judged = [r for r in self._rows if r[0] is not None]
        shown = [r for r in self._rows if (r[0] or 0) > 0 or r[1] > 0 or r[2] > 0]
        shown.sort(key=lambda r: (-(r[0] or 0), -r[2], r[3]))
        tr.write_line("%10s  %10s  %s" % ("left live", "peak", "test"))
        for left, kept, peak, nodeid, note in shown[:_SUMMARY_ROWS]:
            line = "%10s  %10s  %s" % ("-" if left is None else format_bytes(left),
                                       format_bytes(peak), nodeid)
            if kept:
                line += "  (+%s kept)" % format_bytes(kept)
            tr.write_line(line + ("  " + note if note else ""))
        if len(shown) > _SUMMARY_ROWS:
            tr.write_line("(and %d more tests)" % (len(shown) - _SUMMARY_ROWS))
        quiet = sum(1 for r in judged if r not in shown)
        if quiet:
            tr.write_line("%d test%s left nothing live and needed no device memory" %
                          (quiet, "" if quiet == 1 else "s"))
        unjudged = len(self._rows) - len(judged)
        if unjudged:
            tr.write_line("%d test%s not judged: their setup or call did not pass" %
                          (unjudged, "" if unjudged == 1 else "s"))


def pytest_sessionstart(session):
    """--gpuwatch-torch-blocks: PyTorch's blocks in gpuwatch's reports
    (gpuwatch.torch_blocks; docs/pytorch.md), from before the tests import
    torch or, when a conftest did, from now."""
    if session.config.getoption("gpuwatch_torch_blocks"):
        from gpuwatch import torch_blocks
        torch_blocks.install()
