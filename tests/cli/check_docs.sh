#!/usr/bin/env bash
# The man pages and completions gpuwatch_docgen wrote under SHARE (build/share),
# used as a user would:
#   - every page renders with `groff -man -ww -z` and `man -l` without a warning;
#   - bash, with the completion sourced and COMP_WORDS/COMP_CWORD set as bash
#     sets them, completes `gpuwatch rep` to report, `gpuwatch report --fo` to
#     --format, that option's value to its choices, and a FILE option's value
#     to paths;
#   - zsh (where installed: scripts/install-deps.sh installs it for the tests)
#     parses the function, and compinit registers it for gpuwatch.
# Usage: check_docs.sh SHARE
set -euo pipefail
share=$1
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

pages=("$share"/man/man1/*.1)
[ "${#pages[@]}" -ge 9 ] || fail "expected gpuwatch.1 and a page per subcommand, found ${#pages[@]}"
for page in "${pages[@]}"; do
  warnings=$(groff -man -ww -z "$page" 2>&1) || fail "groff failed on $page: $warnings"
  [ -z "$warnings" ] || fail "groff warns on $page: $warnings"
  if command -v man >/dev/null; then
    warnings=$(MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null) || fail "man -l failed on $page"
    [ -z "$warnings" ] || fail "man warns on $page: $warnings"
  fi
done
text=$(MANWIDTH=80 man -l "$share/man/man1/gpuwatch-report.1" 2>/dev/null)
grep -q -- "--format FORMAT" <<<"$text" || fail "gpuwatch-report(1) does not render --format: $text"

# complete WORD... : COMPREPLY for the last word, one per line.
complete_words() {
  bash --norc --noprofile -c '
    source "$1"; shift
    COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
    _gpuwatch
    printf "%s\n" "${COMPREPLY[@]}"' _ "$share/bash-completion/completions/gpuwatch" "$@"
}
expect() {
  local want=$1
  shift
  local got
  got=$(complete_words "$@" | sort | tr '\n' ' ')
  [ "$got" = "$want " ] || fail "completing '$*': got '$got', want '$want'"
}
expect "report" gpuwatch rep
expect "--format" gpuwatch report --fo
expect "html" gpuwatch report --format ht
expect "growth" gpuwatch top --sort gr
expect "--max-growth --max-leak --max-peak --max-phase-peak" gpuwatch check x.json --max
expect "--once" gpuwatch top --onc
# A FILE option completes paths; run's command after -- completes commands.
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpuwatch-compl.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
touch "$tmp/base-report.json" "$tmp/other.txt"
expect "$tmp/base-report.json" gpuwatch check --baseline "$tmp/base-"
expect "$tmp/base-report.json" gpuwatch diff "$tmp/base-"
got=$(complete_words gpuwatch run -o x.json -- bas)
grep -qx bash <<<"$got" || fail "completing 'gpuwatch run -- bas': no bash in '$got'"

if command -v zsh >/dev/null; then
  zsh -n "$share/zsh/vendor-completions/_gpuwatch" || fail "zsh cannot parse _gpuwatch"
  got=$(zsh -f -c 'fpath=("$1" $fpath); autoload -Uz compinit; compinit -u -d "$2/zcompdump"
                   autoload +X _gpuwatch && print -r -- ${_comps[gpuwatch]}' \
    _ "$share/zsh/vendor-completions" "$tmp")
  [ "$got" = "_gpuwatch" ] || fail "compinit did not register _gpuwatch for gpuwatch: '$got'"
else
  echo "zsh not installed: its completion not loaded (scripts/install-deps.sh installs it)"
fi
echo "ok: ${#pages[@]} pages render without warnings; bash completes; zsh loads _gpuwatch"
