#!/usr/bin/env bash
# Builds the Debian package with CPack (cmake/GpuwatchPackage.cmake), checks its
# control data and contents, installs it with dpkg into a fresh root (an empty
# folder with its own dpkg database: no container, no chroot), runs the
# installed `gpuwatch run` from there on examples/leaky_loop on the CUDA
# simulator, and removes it again:
#   - Package, Version (the project's), Maintainer, Description, Depends (from
#     dpkg-shlibdeps, plus the two libraries libgpuwatch.so dlopens), and
#     `apt-get install --simulate ./gpuwatch_*.deb` on this machine installs it;
#   - the package holds exactly the files `cmake --install` installs, under
#     /usr, stripped;
#   - the installed command preloads the installed library, and its report
#     names the example's leak at leaky_loop.cu:<line>; Python under it imports
#     the installed package (and so writes __pycache__ next to it);
#   - `dpkg -r` (what `apt remove` runs) leaves nothing of the package behind.
#
# Usage: run_deb_test.sh BUILD_DIR SOURCE_DIR SIM_LIB_DIR CPACK CMAKE VERSION
set -euo pipefail

build=$1 source=$2 sim=$3 cpack=$4 cmake=$5 version=$6

# shellcheck source=tests/install/common.sh
source "$(dirname "$0")/common.sh" deb

# --- the package ------------------------------------------------------------
start=$SECONDS
"$cpack" -G DEB -B "$tmp/out" --config "$build/CPackConfig.cmake" >"$tmp/cpack.log" 2>&1 || {
  cat "$tmp/cpack.log" >&2
  fail "cpack -G DEB failed"
}
deb=$tmp/out/gpuwatch_${version}_$(dpkg --print-architecture).deb
[ -f "$deb" ] || fail "no $deb: $(ls "$tmp/out")"
echo "cpack -G DEB: $((SECONDS - start)) s, $(du -h "$deb" | cut -f1)"

field() { dpkg-deb -f "$deb" "$1"; }
[ "$(field Package)" = gpuwatch ] || fail "Package: $(field Package)"
[ "$(field Version)" = "$version" ] || fail "Version: $(field Version), not $version"
[ "$(field Architecture)" = "$(dpkg --print-architecture)" ] || fail "Architecture: $(field Architecture)"
[ "$(field Maintainer)" = "gpuwatch developers <dev@gpuwatch.invalid>" ] ||
  fail "Maintainer: $(field Maintainer)"
[ "$(field Section)" = devel ] || fail "Section: $(field Section)"
description=$(field Description)
[ "$(head -n 1 <<<"$description")" = "in-process CUDA memory and transfer profiler and leak detector" ] ||
  fail "Description's summary: $(head -n 1 <<<"$description")"
grep -q "^ gpuwatch loads into a CUDA program" <<<"$description" ||
  fail "Description has no long description: $description"
# Depends: one package a comma-separated entry (version constraints aside).
depends=$(field Depends)
mapfile -t depended < <(tr ',' '\n' <<<"$depends" | sed 's/(.*)//; s/ //g')
for p in libc6 libstdc++6 libprotobuf32 zlib1g libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0 \
  libdw1 libunwind8; do
  printf '%s\n' "${depended[@]}" | grep -qx "$p" || fail "Depends has no $p: $depends"
done
grep -q 'libc6 (>= [0-9.]*)' <<<"$depends" || fail "Depends has no versioned libc6 (shlibdeps): $depends"
# `apt install ./gpuwatch_*.deb` here: every dependency is met.
apt-get install --simulate --no-install-recommends "$deb" >"$tmp/apt.log" 2>&1 || {
  cat "$tmp/apt.log" >&2
  fail "apt-get install --simulate $deb failed"
}
grep -q "^Inst gpuwatch " "$tmp/apt.log" || fail "apt would not install gpuwatch: $(cat "$tmp/apt.log")"
grep "^Inst " "$tmp/apt.log" | grep -v "^Inst gpuwatch " &&
  fail "apt would install more than gpuwatch here (a dependency is not installed)"
# The maintainer scripts: CPack's postinst and postrm run ldconfig (a library in
# /usr/lib); prerm removes Python's caches (cmake/deb/prerm.in).
[ "$(dpkg-deb --ctrl-tarfile "$deb" | tar -t | sed 's|^\./||' | grep . | sort | tr '\n' ' ')" = \
  "control md5sums postinst postrm prerm " ] || fail "control files: $(dpkg-deb --ctrl-tarfile "$deb" | tar -t)"

# Exactly `cmake --install`'s files, under /usr.
"$cmake" --install "$build" --prefix "$tmp/reference" >/dev/null || fail "cmake --install failed"
(cd "$tmp/reference" && find . -type f | sed 's|^\./|usr/|' | sort) >"$tmp/installed.txt"
dpkg-deb --fsys-tarfile "$deb" | tar -t | grep -v '/$' | sed 's|^\./||' | sort >"$tmp/packaged.txt"
diff "$tmp/installed.txt" "$tmp/packaged.txt" >&2 ||
  fail "the package's files differ from cmake --install's (< installed, > packaged)"
for f in usr/bin/gpuwatch usr/lib/libgpuwatch.so usr/include/gpuwatch/gpuwatch.h \
  usr/lib/cmake/gpuwatch/gpuwatchConfig.cmake usr/lib/pkgconfig/gpuwatch.pc \
  usr/share/gpuwatch/python/gpuwatch/__init__.py usr/share/doc/gpuwatch/README.md \
  usr/share/doc/gpuwatch/docs/install.md; do
  grep -qx "$f" "$tmp/packaged.txt" || fail "the package has no $f"
done

# --- installed into a fresh root --------------------------------------------
# dpkg --root: the root's own database; scripts run outside a chroot (the root
# has no shell) with DPKG_ROOT set; the root's database knows none of the
# dependencies (checked above against this machine's), hence --force-depends.
root=$tmp/root
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates" "$root/var/lib/dpkg/triggers"
touch "$root/var/lib/dpkg/status" "$root/var/lib/dpkg/available"
# The scripts' ldconfig is a stand-in that notes the call: the real one would
# rebuild this machine's cache.
mkdir "$tmp/bin"
printf '#!/bin/sh\necho "ldconfig $*" >>"%s"\n' "$tmp/ldconfig.log" >"$tmp/bin/ldconfig"
chmod +x "$tmp/bin/ldconfig"
dpkg_root() {
  PATH="$tmp/bin:$PATH" dpkg --root="$root" --log=/dev/null --force-script-chrootless --force-depends \
    --force-not-root "$@"
}
dpkg_root -i "$deb" >"$tmp/dpkg.log" 2>&1 || {
  cat "$tmp/dpkg.log" >&2
  fail "dpkg -i into $root failed"
}
status=$(dpkg-query --admindir="$root/var/lib/dpkg" -W -f='${Status} ${Version}' gpuwatch)
[ "$status" = "install ok installed $version" ] || fail "after dpkg -i: '$status'"
[ "$(cat "$tmp/ldconfig.log")" = "ldconfig " ] || fail "postinst ran ldconfig: $(cat "$tmp/ldconfig.log")"
[ -x "$root/usr/bin/gpuwatch" ] || fail "/usr/bin/gpuwatch is not installed (or not executable)"
for f in bin/gpuwatch lib/libgpuwatch.so; do
  [ -f "$root/usr/$f" ] || fail "/usr/$f is not installed"
  # Stripped: no debug information, no static symbol table.
  readelf -S "$root/usr/$f" | grep -qE '\.debug_info|\.symtab' && fail "/usr/$f is not stripped"
done
[ "$("$root/usr/bin/gpuwatch" --version)" = "$version" ] || fail "gpuwatch --version is not $version"
[ "$(PKG_CONFIG_PATH=$root/usr/lib/pkgconfig pkg-config --modversion gpuwatch)" = "$version" ] ||
  fail "the installed pkg-config file's version is not $version"

# The installed command runs the example on the simulator with the installed library.
mkdir "$tmp/run"
# shellcheck disable=SC2016 # the child's $LD_PRELOAD, expanded by the child
preload=$(cd "$tmp/run" && "$root/usr/bin/gpuwatch" run -- sh -c 'printf "%s\n" "$LD_PRELOAD"' 2>/dev/null)
[ "$preload" = "$(realpath "$root/usr/lib/libgpuwatch.so")" ] ||
  fail "the installed gpuwatch run preloaded '$preload', not $root/usr/lib/libgpuwatch.so"
out=$(cd "$tmp/run" && LD_LIBRARY_PATH=$sim "$root/usr/bin/gpuwatch" run --no-summary -o "$tmp/run/loop.json" \
  -- "$build/examples/leaky_loop" 2>"$tmp/run/err") || fail "gpuwatch run failed: $(cat "$tmp/run/err")"
[ "$out" = "leaky_loop: 8 steps done, 8 history buffers kept" ] || fail "leaky_loop printed '$out'"
grep -qx "gpuwatch: report written to $tmp/run/loop.json" "$tmp/run/err" ||
  fail "the installed gpuwatch run wrote no report: $(cat "$tmp/run/err")"
leak_line=$(grep -n 'cudaMalloc(history).*// leaks' "$source/examples/leaky_loop.cu" | cut -d: -f1)
report=$("$root/usr/bin/gpuwatch" report "$tmp/run/loop.json")
grep -q "Leaked device memory: 2.0 MiB in 8 allocations from 1 site" <<<"$report" ||
  fail "the report does not show leaky_loop's 8 x 256 KiB: $report"
grep -q "leaky_loop.cu:$leak_line " <<<"$report" || fail "the report does not name leaky_loop.cu:$leak_line: $report"

# Python under it imports the installed package, and caches its bytecode next to it.
if command -v python3 >/dev/null; then
  out=$(cd "$tmp/run" && "$root/usr/bin/gpuwatch" run --no-summary -o "$tmp/run/py.json" -- \
    python3 -c 'import gpuwatch; print(gpuwatch.__file__, gpuwatch.version())' 2>"$tmp/run/err")
  expected="$(realpath "$root/usr/share/gpuwatch/python")/gpuwatch/__init__.py $version"
  [ "$out" = "$expected" ] || fail "python under the installed gpuwatch run: '$out': $(cat "$tmp/run/err")"
  [ -d "$root/usr/share/gpuwatch/python/gpuwatch/__pycache__" ] ||
    fail "python wrote no __pycache__ next to the installed package (the removal check below needs one)"
fi

# --- removed ----------------------------------------------------------------
dpkg_root -r gpuwatch >"$tmp/dpkg.log" 2>&1 || {
  cat "$tmp/dpkg.log" >&2
  fail "dpkg -r gpuwatch failed"
}
grep -i "warning" "$tmp/dpkg.log" | grep -v "dependency problems\|depends on" &&
  fail "dpkg -r warned: $(cat "$tmp/dpkg.log")"
status=$(dpkg-query --admindir="$root/var/lib/dpkg" -W -f='${db:Status-Status}' gpuwatch 2>/dev/null || true)
[ "$status" = "not-installed" ] || [ "$status" = "config-files" ] || fail "after dpkg -r: '$status'"
[ "$(cat "$tmp/ldconfig.log")" = "$(printf 'ldconfig \nldconfig ')" ] ||
  fail "postinst and postrm ran ldconfig: $(cat "$tmp/ldconfig.log")"
left=$(cd "$root" && find . -mindepth 1 -path ./var -prune -o -print)
[ -z "$left" ] || fail "dpkg -r left these behind: $left"

echo "deb package test passed: $(basename "$deb")"
