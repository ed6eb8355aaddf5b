"""The pytest plugin's verdict as the test's own failure.

What a test leaves live is known only after its teardown (its fixtures free
what they own there), but a leak is the test's failure, not its teardown's:
for each test the gate judges, the plugin runs pytest's protocol itself with
the reports held back (runtestprotocol(log=False), as pytest-rerunfailures
does), then moves the verdict, made at teardown, onto the call's report
before pytest logs them. A test that leaks is then one FAILED test (`-v`
prints FAILED once; JUnit XML has one failure, no teardown error), with the
call's captured output and duration.

Where another plugin runs the protocol instead, the verdict stays on the
teardown's report: it is shown as the test's failure ("F", FAILED) and the
call's pass is not counted, as before.
"""

import pytest


def move_to_call(reports):
    """Moves the gate's figures and its failure from the teardown's report to
    the call's, where there is one (a test whose setup failed has none)."""
    call = next((r for r in reports if r.when == "call"), None)
    teardown = next((r for r in reports if r.when == "teardown"), None)
    figures = getattr(teardown, "gpuwatch", None)
    if call is None or not figures:
        return
    call.gpuwatch, teardown.gpuwatch = figures, None
    if figures["failed"] and call.passed:
        call.outcome, call.longrepr = "failed", teardown.longrepr
        teardown.outcome, teardown.longrepr = "passed", None


class Verdict:
    """The protocol for the tests `judges(item)` says the gate judges."""

    def __init__(self, config, judges):
        self._config = config
        self._judges = judges

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item, nextitem):
        if not self._judges(item):
            return None
        from _pytest.runner import runtestprotocol
        ihook = item.ihook
        ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
        reports = runtestprotocol(item, log=False, nextitem=nextitem)
        move_to_call(reports)
        for report in reports:
            ihook.pytest_runtest_logreport(report=report)
        ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
        return True

    @pytest.hookimpl(tryfirst=True)
    def pytest_report_teststatus(self, report, config):
        # Another plugin ran the protocol: show a teardown verdict as the
        # test's failure, not as an error of its teardown.
        if report.when == "teardown" and report.failed and \
                (getattr(report, "gpuwatch", None) or {}).get("failed"):
            return "failed", "F", "FAILED"
        return None

    def count_once(self, report):
        """A teardown verdict (another plugin ran the protocol): the call of
        the test passed and pytest counted it as passed; it counts once, as
        failed."""
        if report.when != "teardown" or not report.gpuwatch["failed"]:
            return
        reporter = self._config.pluginmanager.get_plugin("terminalreporter")
        stats = getattr(reporter, "stats", None)
        if isinstance(stats, dict) and stats.get("passed"):
            stats["passed"] = [r for r in stats["passed"]
                               if getattr(r, "nodeid", None) != report.nodeid or r.when != "call"]
            if not stats["passed"]:
                del stats["passed"]
