#!/usr/bin/env bash
# Checks the example Prometheus configuration and alerting rules
# (examples/prometheus) with promtool, and runs their unit test
# (gpuwatch-rules.test.yml). Exit 77 (skipped) when promtool is missing.
# Usage: check_rules.sh EXAMPLES_DIR
set -euo pipefail
dir="$1"
if ! command -v promtool >/dev/null; then
  echo "promtool is not installed (scripts/install-deps.sh installs the prometheus package): skipped"
  exit 77
fi
cd "$dir"
promtool check config prometheus.yml
promtool check rules gpuwatch-rules.yml
promtool test rules gpuwatch-rules.test.yml
