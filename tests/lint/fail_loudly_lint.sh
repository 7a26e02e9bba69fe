#!/usr/bin/env bash
# Every shell script of the repository fails loudly: each one that runs on its own (a file with a
# #! line naming a shell) is bash, parses (bash -n) and sources tools/lib/fail-loudly.sh at its
# top level, whose ERR trap prints the script, line and command before a `set -e` exit; a shell
# file without a #! line is a library for `source` (it runs under its caller's trap) and must not
# be executable. POSIX sh scripts are refused: sh has no ERR trap.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
source "$root/tools/lib/fail-loudly.sh"
cd "$root"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files)
else
  mapfile -t files < <(find . -path ./build -prune -o -path './build-*' -prune -o -path ./.git -prune -o -type f -print | sed 's|^\./||')
fi
problems=0 scripts=0 libraries=0
problem() { echo "fail_loudly_lint: $1: $2" >&2; problems=$((problems + 1)); }
for f in "${files[@]}"; do
  [ -f "$f" ] || continue
  first=""
  IFS= read -r first 2>/dev/null <"$f" || true  # no process per file: ~600 files, under a loaded ctest
  if [[ $first == '#!'* ]]; then
    [[ $first =~ ^#!(/usr)?/bin/(env[[:space:]]+)?(ba|da|k|z)?sh([[:space:]]|$) ]] || continue
    scripts=$((scripts + 1))
    if [[ ! $first =~ bash ]]; then
      problem "$f" "a POSIX sh script ($first): make it bash, which has the ERR trap tools/lib/fail-loudly.sh installs"
      continue
    fi
    err=$(bash -n "$f" 2>&1) || problem "$f" "bash -n: $(head -n 1 <<<"$err")"
    grep -qE '^(source|\.)[[:space:]].*fail[-_]loudly' "$f" ||
      problem "$f" "does not source tools/lib/fail-loudly.sh at its top level (after set -euo pipefail): a set -e exit would say nothing"
  elif [[ $f == *.sh ]]; then
    libraries=$((libraries + 1))
    [ ! -x "$f" ] || problem "$f" "a library for source (no #! line) but executable: run on its own it would have no ERR trap; give it a #! line and the trap, or chmod -x"
  fi
done
[ "$scripts" -gt 0 ] || { echo "fail_loudly_lint: found no shell scripts under $root: is this the repository?" >&2; exit 1; }
if [ $problems -gt 0 ]; then
  echo "fail_loudly_lint: $problems problem(s) in $scripts scripts and $libraries libraries" >&2
  exit 1
fi
echo "fail_loudly_lint: $scripts scripts source tools/lib/fail-loudly.sh and parse; $libraries libraries are sourced only"
