#!/usr/bin/env bash
# Every program's command line in the one style (tools/cli, CLI11): --help prints its options and
# exits 0, --version prints "NAME VERSION" and exits 0, an unknown option exits 2 with a message
# on stderr that starts with the program's name and names an option, and a value out of range
# exits 2 naming that option.
#
# usage: cli_test.sh VERSION PROGRAM[:BAD_VALUE_ARGS] ...   (BAD_VALUE_ARGS: comma-separated argv
#        whose last two are an option and a value it refuses)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../tools/lib/fail-loudly.sh"

version=$1
shift
work=$(mktemp -d /tmp/sumcast-cli.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

checked=0
for spec in "$@"; do
  prog=${spec%%:*}
  bad=""
  [ "$prog" != "$spec" ] && bad=${spec#*:}
  name=$(basename "$prog")
  rc=0
  "$prog" --help >"$work/out" 2>"$work/err" || rc=$?
  [ "$rc" = 0 ] || fail "$name --help exited $rc"
  grep -q "^Usage: $name" "$work/out" || fail "$name --help prints no usage line"
  grep -q -- "--version" "$work/out" || fail "$name --help does not list --version"
  rc=0
  "$prog" --version >"$work/out" 2>"$work/err" || rc=$?
  [ "$rc" = 0 ] || fail "$name --version exited $rc"
  [ "$(cat "$work/out")" = "$name $version" ] || fail "$name --version printed '$(cat "$work/out")'"
  rc=0
  "$prog" --no-such-option-xyz >"$work/out" 2>"$work/err" || rc=$?
  [ "$rc" = 2 ] || fail "$name --no-such-option-xyz exited $rc, want 2"
  grep -q "^$name: .*--" "$work/err" || { cat "$work/err"; fail "$name: the usage error names no option"; }
  if [ -n "$bad" ]; then
    IFS=, read -r -a argv <<<"$bad"
    rc=0
    "$prog" "${argv[@]}" >"$work/out" 2>"$work/err" || rc=$?
    [ "$rc" = 2 ] || fail "$name ${argv[*]} exited $rc, want 2"
    opt=${argv[${#argv[@]}-2]}  # the option whose value (the last argument) is bad
    grep -q -- "^$name: $opt" "$work/err" || { cat "$work/err"; fail "$name ${argv[*]}: error does not name $opt"; }
  fi
  checked=$((checked + 1))
done
echo "PASS: $checked programs: --help, --version, unknown options and bad values"
