#!/usr/bin/env bash
# gpuwatch's validation on a machine with an NVIDIA GPU (tests/gpu/README.md).
#
#   tests/gpu/run.sh [--build DIR] [--out DIR] [--only PARTS] [--skip PARTS] [--budget S]
#                    [--python PY]
#       Runs the validation on the GPU (parts: env, programs, sequences, questions,
#       cupti_clients, live, triage, torch_leak, torch_counters, torch_pytest, torch_phases,
#       torch_profiler, torch_modes, sanitizer, torch_step, overhead; PyTorch's under PY, default
#       $GPUWATCH_TORCH_PYTHON, else python3). Prints PASS/FAIL/SKIP/INFO
#       lines and a last line "PASS|FAIL gpu-validation ..."; writes everything
#       to --out, else $OUT, else ./gpu-results. Exit 0 when nothing failed.
#   tests/gpu/run.sh --sim [--build DIR] ...
#       The same without a GPU: every part that can run on the simulator
#       (torch_counters, torch_pytest, torch_phases with --python's PyTorch).
#   tests/gpu/run.sh --dry-run [--build DIR] ...
#       Prints what would run; runs nothing.
#   tests/gpu/run.sh --bundle DIR [--build BUILD]
#       Here, before going to the GPU machine: copies what a GPU run needs from
#       BUILD (default build/) into DIR (about 30 MiB), to be carried there and
#       passed as --build DIR. The GPU machine needs no compiler.
#
# --build defaults to build-gpu-bundle/ when it exists, else build/. When that
# directory has no libgpuwatch.so, the script tries to build it with cmake and
# ninja (this needs the development packages the GPU machine lacks).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)

build=""
bundle=""
args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --build=*) build=${1#--build=}; shift ;;
    --bundle) bundle=$2; shift 2 ;;
    --bundle=*) bundle=${1#--bundle=}; shift ;;
    -h|--help) sed -n '2,25p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) args+=("$1"); shift ;;
  esac
done

if [[ -z "$build" ]]; then
  if [[ -n "$bundle" ]]; then
    build="$root/build"
  elif [[ -f "$root/build-gpu-bundle/lib/libgpuwatch.so" ]]; then
    build="$root/build-gpu-bundle"
  else
    build="$root/build"
  fi
fi

# --- bundle: what a GPU run needs, from a build directory ----------------------
make_bundle() {
  local from=$1 to=$2
  [[ -f "$from/lib/libgpuwatch.so" ]] || { echo "run.sh: $from/lib/libgpuwatch.so is missing; build first: ninja -C $from gwgpu_all" >&2; exit 2; }
  rm -rf "$to"
  mkdir -p "$to"
  local missing=0
  copy() {  # copy REL [strip]: from/REL -> to/REL
    local rel=$1 mode=${2:-keep}
    if [[ ! -e "$from/$rel" ]]; then
      echo "run.sh: not in the build (skipped): $rel" >&2
      missing=$((missing + 1))
      return
    fi
    mkdir -p "$to/$(dirname "$rel")"
    cp -L "$from/$rel" "$to/$rel"
    # Libraries need no debug information; programs keep theirs (file:line checks).
    if [[ $mode == strip ]]; then strip --strip-debug "$to/$rel"; fi
  }
  copy lib/libgpuwatch.so strip
  copy bin/gpuwatch strip
  # What `gpuwatch run` puts on PYTHONPATH: the package (tools/CMakeLists.txt's
  # GPUWATCH_PYTHON_FILES) and the --torch-blocks shim.
  for f in __init__.py pytest_plugin.py pytest_torch.py pytest_verdict.py sizes.py torch_blocks.py \
           torch_shim/sitecustomize.py; do
    copy "share/gpuwatch/python/gpuwatch/$f"
  done
  for p in leaky_loop oom pool_and_driver; do copy "examples/$p"; done
  for p in api_mix exit_with leak_sites threads snapshot_signal transfers reuse_race zero_copy \
           copy_findings arrays graphs graph_reuse default_copies vmm_striped nvtx_pool live_steps \
           cupti_client cupti_client_dlsym ipc_pair vmm_handles kernel_fault hung_copy; do
    copy "tests/programs/$p"
  done
  for p in leaky_loop oom pool_and_driver api_mix leak_sites transfers; do copy "tests/gpu/static/$p"; done
  copy tests/gpu/libgwgpu_recorder.so strip
  copy tests/sim/test/nvcc_program
  for l in libcuda.so.1 libcudart.so.13 libcupti.so.13; do copy "tests/sim/lib/$l" strip; done
  (cd "$to/tests/sim/lib" 2>/dev/null && ln -sf libcuda.so.1 libcuda.so && ln -sf libcudart.so.13 libcudart.so && ln -sf libcupti.so.13 libcupti.so) || true
  copy bench/overhead_workload
  copy bench/libgwbench_null_subscriber.so strip
  # The sources the programs were built from: the report checks find their
  # expected lines (file:line of leak sites) there, not in the working tree.
  local src
  src=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$from/CMakeCache.txt" 2>/dev/null || true)
  if [[ -n "$src" && -d "$src" ]]; then
    mkdir -p "$to/src/examples" "$to/src/tests/e2e/programs"
    cp "$src"/examples/*.cu "$to/src/examples/"
    cp "$src"/tests/e2e/programs/*.cu "$src"/tests/e2e/programs/*.cc "$to/src/tests/e2e/programs/"
  else
    echo "run.sh: cannot find the sources of $from (CMakeCache.txt); checks will use the working tree" >&2
  fi
  # Libraries gpuwatch dlopens at run time; the GPU machine may lack them.
  mkdir -p "$to/deps"
  for soname in libunwind.so.8 libdw.so.1 libelf.so.1; do
    local path
    path=$(ldconfig -p | awk -v s="$soname" '$1 == s && /x86-64/ {print $NF; exit}')
    if [[ -n "$path" ]]; then cp -L "$path" "$to/deps/$soname"; else echo "run.sh: $soname not found here; not carried" >&2; fi
  done
  # The gpuwatch command's own libraries (protobuf, prometheus-cpp, civetweb):
  # the GPU machine has none of Debian's; validate.py puts deps/cli on its path.
  mkdir -p "$to/deps/cli"
  ldd "$from/bin/gpuwatch" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' |
    while read -r soname path; do
      case "$soname" in
        libc.so*|libm.so*|libstdc++.so*|libgcc_s.so*|libpthread.so*|libdl.so*|librt.so*) ;;
        *) cp -L "$path" "$to/deps/cli/$soname" ;;
      esac
    done
  {
    echo "gpuwatch GPU bundle"
    echo "made: $(date -u +%Y-%m-%dT%H:%M:%SZ) from $from"
    echo "commit: $(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet 2>/dev/null || echo ' (with local changes)')"
    echo "deps needed by the carried libraries:"
    for f in "$to"/deps/*.so*; do echo "  $(basename "$f"): $(readelf -d "$f" | awk '/NEEDED/ {gsub(/[][]/, "", $5); printf "%s ", $5}')"; done
  } > "$to/MANIFEST"
  echo "bundle: $to ($(du -sh "$to" | cut -f1)), $missing file(s) missing"
  echo "carry it to the GPU machine and run: tests/gpu/run.sh --build $(basename "$to")"
}

if [[ -n "$bundle" ]]; then
  make_bundle "$(cd "$build" && pwd)" "$bundle"
  exit 0
fi

command -v python3 >/dev/null || { echo "FAIL gpu-validation: python3 is required"; exit 2; }

dry=0
for a in "${args[@]+"${args[@]}"}"; do [[ $a == --dry-run ]] && dry=1; done
if [[ ! -f "$build/lib/libgpuwatch.so" && $dry == 0 ]]; then
  echo "== no libgpuwatch.so in $build: trying to build it (cmake + ninja)"
  if command -v cmake >/dev/null && command -v ninja >/dev/null &&
     cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >"${OUT:-/tmp}/gpuwatch-build.log" 2>&1 &&
     ninja -C "$build" -j "$(nproc)" gwgpu_all >>"${OUT:-/tmp}/gpuwatch-build.log" 2>&1; then
    echo "PASS build: $build"
  else
    echo "FAIL build: cannot build gpuwatch here (see ${OUT:-/tmp}/gpuwatch-build.log); on a machine"
    echo "     without the development packages, carry a bundle: tests/gpu/run.sh --bundle DIR (where it builds)"
    exit 1
  fi
fi

export PYTHONDONTWRITEBYTECODE=1
exec python3 "$here/validate.py" --build "$build" "${args[@]+"${args[@]}"}"
