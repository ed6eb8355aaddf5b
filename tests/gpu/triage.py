"""What the `triage` part of the GPU validation (validate.py, README.md) asks of
issue 35's two programs, on a GPU as on the simulator.

kernel_fault (tests/e2e/programs/kernel_fault.cu): Scatter writes through
indices far out of bounds, so on a GPU its launch succeeds and the fault
surfaces at a later call; the program prints "kernel_fault: CALL: MESSAGE" for
the call that returned the error and exits 1. fault_checks() says whether
gpuwatch's report and stderr summary name that error at that call, with the
kernels launched since the last good synchronization (Scale and Scatter, not
Fill); surfaced() answers the question only a driver can: at which call did
the fault surface, with which code, and what failed after it.

hung_copy (tests/e2e/programs/hung_copy.cu): a copy behind a kernel that never
finishes; why_shows() says whether `gpuwatch why PID` names the call and its
line.
"""

import os
import re

import checks

# Where the program checks each call, by the text that marks its line in
# kernel_fault.cu: the copy's line carries a marker, the others the name the
# program prints ("launch" is cudaGetLastError after the two launches).
FAULT_CALL_MARKERS = {"cudaMemcpy": "surfaces here"}
# The runtime function behind each name kernel_fault prints.
FAULT_CALL_APIS = {"launch": "cudaGetLastError"}
# The sticky codes docs/report-format.md lists (a kernel's fault).
STICKY_CODES = {700, 719, 716, 715, 718, 717, 714, 710, 702, 214}


def program_source(source_dir, name):
    return os.path.join(source_dir, "tests", "e2e", "programs", name)


def fault_site(source_dir, call):
    """kernel_fault.cu:LINE of the call the program names."""
    src = program_source(source_dir, "kernel_fault.cu")
    marker = FAULT_CALL_MARKERS.get(call, f'"{call}")')
    return f"kernel_fault.cu:{checks.line_of(src, marker)}"


def program_saw(stderr):
    """(call, message) of the program's "kernel_fault: CALL: MESSAGE" line, or
    (None, None) when it saw no error."""
    m = re.search(r"^kernel_fault: (\S+): (.*)$", stderr, re.M)
    return (m.group(1), m.group(2)) if m else (None, None)


def first_sticky(report):
    return checks.get(report, "cuda_errors", "sticky", 0, default={}) or {}


def fault_checks(report, stderr, source_dir):
    """[(ok, text)]: what gpuwatch must get right about the fault."""
    c = checks.Checker()
    call, message = program_saw(stderr)
    c.true("the program saw an error", call is not None,
           f"at {call}: {message}" if call else "no 'kernel_fault: CALL:' line")
    c.true("report written and valid JSON", report is not None)
    if call is None or report is None:
        return c.results
    api = FAULT_CALL_APIS.get(call, call)
    c.eq("cuda_errors.run_failed", checks.get(report, "cuda_errors", "run_failed"), True)
    sticky = first_sticky(report)
    c.true("a sticky error's code", sticky.get("code") in STICKY_CODES,
           f"{sticky.get('name')} ({sticky.get('code')}); the program saw '{message}'")
    c.eq("sticky api (the call where the program saw it)", sticky.get("api"), api)
    c.eq("sticky location", sticky.get("location"), fault_site(source_dir, call))
    src = program_source(source_dir, "kernel_fault.cu")
    kernels = sticky.get("kernels") or []
    for name in ("Scale", "Scatter"):
        launched = [k for k in kernels if f"::{name}(" in (k.get("kernel") or "")]
        c.true(f"{name} among the kernels before it", launched,
               f"kernels {[k.get('kernel') for k in kernels]}")
        if launched:
            c.eq(f"{name}'s launch site", launched[-1].get("location"),
                 f"kernel_fault.cu:{checks.line_of(src, 'launches ' + name)}")
    c.true("Fill (before the last good sync) not among them",
           not [k for k in kernels if "::Fill(" in (k.get("kernel") or "")])
    summary = [line for line in stderr.splitlines() if line.startswith("gpuwatch:")]
    lead = (f"gpuwatch: the run failed: CUDA error {sticky.get('name')} ({sticky.get('code')}), "
            f"surfaced in {sticky.get('api')} at {sticky.get('location')}")
    c.true("the stderr summary leads with the error", summary and summary[0].startswith(lead),
           summary[0] if summary else "no gpuwatch line")
    return c.results


def surfaced(report, stderr):
    """The question's answer, one line: where the fault surfaced on this driver
    and what failed after it."""
    call, message = program_saw(stderr)
    if call is None:
        return "no call returned an error: the kernel did not fault"
    sticky = first_sticky(report)
    failed = [f"{x.get('api')} {x.get('name')} ({x.get('code')}) x{x.get('count')}"
              for x in checks.get(report, "cuda_errors", "calls", default=[]) or []]
    kernels = [(k.get("kernel") or "").split("::")[-1].split("(")[0]
               for k in sticky.get("kernels") or []]
    return (f"the program saw '{message}' at {FAULT_CALL_APIS.get(call, call)}; gpuwatch: "
            f"sticky {sticky.get('name')} ({sticky.get('code')}) in {sticky.get('api')} at "
            f"{sticky.get('location')} after kernels {kernels}; failed calls: "
            f"{'; '.join(failed) or 'none'} (GWSIM_FAULT_KERNEL's model: the launch succeeds, "
            "the next synchronizing call fails, here the cudaMemcpy, and later calls too)")


def why_shows(out, call, site):
    """The `gpuwatch why` line of the thread in `call` at `site`, or None."""
    for line in out.splitlines():
        if f": in {call} for " in line and line.endswith(f" at {site}"):
            return line.strip()
    return None


def proc_state(pid):
    """A process's state and kernel wait channel, from /proc."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        with open(f"/proc/{pid}/wchan") as f:
            return f"state {state}, waiting in {f.read().strip() or '?'}"
    except (OSError, IndexError):
        return "no /proc entry"
