#!/usr/bin/env bash
# sumcastd and sumcastctl command lines without a running dataplane: usage errors, --check and
# `sumcastctl check` on a valid and on invalid agg.conf files (the message names file, line and
# key), and sumcastctl against a prefix where nothing runs.
#
# usage: sumcastd_cli_test.sh SUMCASTD SUMCASTCTL [TEST_WORKER]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../tools/lib/fail-loudly.sh"

sumcastd=$1 sumcastctl=$2
work=$(mktemp -d /tmp/sumcastd-cli.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# expect RC CMD...: runs CMD, stores its stderr+stdout in $work/out, checks the exit status.
expect() {
  local want=$1 rc=0
  shift
  "$@" >"$work/out" 2>&1 || rc=$?
  [ "$rc" = "$want" ] || { cat "$work/out"; fail "'$*' exited $rc, want $want"; }
}

head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$work/token"
echo >>"$work/token"
chmod 600 "$work/token"
cat >"$work/good.conf" <<EOF
eal = { lcores = "0,1"; file_prefix = "sc-cli-$$"; vdevs = [ "net_null0" ]; };
port = { device = "net_null0"; ipv4 = "10.9.0.1"; };
control = { token_file = "$work/token"; };
EOF

# Usage errors: exit 2.
expect 2 "$sumcastd"
expect 2 "$sumcastd" --bogus
expect 2 "$sumcastd" -c
expect 0 "$sumcastd" --help
grep -q "^Usage: sumcastd" "$work/out" || fail "--help prints no usage"
expect 0 "$sumcastd" --version
grep -q "^sumcastd [0-9]" "$work/out" || fail "--version prints no version"
expect 2 "$sumcastd" -c "$work/good.conf" --bogus
grep -q -- "--bogus" "$work/out" || fail "an unknown option is not named"

# A valid file.
expect 0 "$sumcastd" -c "$work/good.conf" --check
grep -q "good.conf: OK" "$work/out" || fail "--check prints no OK"
expect 0 "$sumcastctl" check "$work/good.conf"

# An unknown key on line 3: exit 1, message "<file>:3: <key>: ...".
sed 's/ipv4 = "10.9.0.1";/ipv4 = "10.9.0.1"; speed = 5;/' "$work/good.conf" >"$work/bad_key.conf"
expect 1 "$sumcastd" -c "$work/bad_key.conf"
grep -q "bad_key.conf:2: .*speed" "$work/out" || { cat "$work/out"; fail "unknown key: message lacks file:line and key"; }
expect 1 "$sumcastd" -c "$work/bad_key.conf" --check
expect 1 "$sumcastctl" check "$work/bad_key.conf"
grep -q "bad_key.conf:2: .*speed" "$work/out" || fail "sumcastctl check: message lacks file:line and key"

# A value out of range on line 4.
cat >"$work/bad_range.conf" <<EOF
eal = { lcores = "0,1"; vdevs = [ "net_null0" ]; };
port = { device = "net_null0"; ipv4 = "10.9.0.1"; };
control = { token_file = "$work/token"; };
dataplane = { burst_size = 100000; };
EOF
expect 1 "$sumcastd" -c "$work/bad_range.conf"
grep -q "bad_range.conf:4: .*burst_size" "$work/out" || { cat "$work/out"; fail "range error lacks file:line and key"; }

# A missing file.
expect 1 "$sumcastd" -c "$work/none.conf"
grep -q "none.conf" "$work/out" || fail "missing file not named"

# sumcastctl with nothing running at that prefix: exit 1 and the socket path named.
expect 1 "$sumcastctl" --prefix "sc-nothing-$$" stats
grep -q "sc-nothing-$$/dpdk_telemetry.v2" "$work/out" || fail "sumcastctl does not name the socket"
expect 0 "$sumcastctl" --prefix "sc-nothing-$$" version
grep -q "^sumcastctl " "$work/out" || fail "sumcastctl version prints no version"
expect 2 "$sumcastctl"
expect 2 "$sumcastctl" frobnicate
echo "PASS: sumcastd/sumcastctl command lines"
