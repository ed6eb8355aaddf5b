#!/usr/bin/env bash
# The node exporter's systemd unit (packaging/systemd/), as `cmake --install`
# writes it into a fresh prefix: ExecStart names that prefix's command, the
# sysusers.d entry is there, `systemd-analyze verify` finds nothing to say,
# and `systemd-analyze security --offline` rates its exposure 2.0 or less
# ("OK"; a unit with no hardening is 9.6). Exit 77 (skipped) without
# systemd-analyze (scripts/install-deps.sh installs systemd).
# Usage: check_unit.sh BUILD_DIR
set -euo pipefail
build="$1"
if ! command -v systemd-analyze >/dev/null; then
  echo "systemd-analyze is not installed (scripts/install-deps.sh installs systemd): skipped"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$tmp/usr" >"$tmp/install.log"
unit="$tmp/usr/lib/systemd/system/gpuwatch-exporter.service"
[ -f "$unit" ] || fail "cmake --install wrote no $unit"
[ -f "$tmp/usr/lib/sysusers.d/gpuwatch.conf" ] || fail "no lib/sysusers.d/gpuwatch.conf"
exec_start=$(grep '^ExecStart=' "$unit")
[ "$exec_start" = "ExecStart=$tmp/usr/bin/gpuwatch exporter --node --listen :9468" ] ||
  fail "unexpected $exec_start"
! grep -qE '@[A-Z_]+@' "$unit" || fail "an unreplaced @VARIABLE@ in $unit"

out=$(systemd-analyze verify "$unit" 2>&1) || fail "systemd-analyze verify: $out"
[ -z "$out" ] || fail "systemd-analyze verify printed: $out"

security=$(systemd-analyze security --offline=true "$unit" 2>&1 | tail -n 1)
level=$(sed -n 's/.*Overall exposure level for gpuwatch-exporter.service: \([0-9.]*\).*/\1/p' \
  <<<"$security")
[ -n "$level" ] || fail "no exposure level in: $security"
awk -v l="$level" 'BEGIN { exit !(l <= 2.0) }' || fail "exposure $level > 2.0: $security"
echo "gpuwatch-exporter.service: verified, exposure $level"
