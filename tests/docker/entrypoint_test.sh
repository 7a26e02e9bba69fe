#!/usr/bin/env bash
# docker/entrypoint.sh outside a container: with no configuration it exits 64, with an invalid one
# 65, with huge_pages = "on" and not eal.memory_mb of hugepages free (or none mounted) 66, with
# an af_packet interface this namespace lacks 67 — each with a message naming what to do — and it
# never starts sumcastd in those cases. Also `sumcastctl check --json`, which it parses.
#
# usage: entrypoint_test.sh SUMCASTD SUMCASTCTL
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../tools/lib/fail-loudly.sh"
sumcastd=$1 sumcastctl=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
entrypoint="${SUMCAST_SOURCE_DIR:-$here/../..}/docker/entrypoint.sh"
work=$(mktemp -d /tmp/sumcast-entrypoint.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
mkdir -p "$work/bin"
ln -s "$sumcastd" "$work/bin/sumcastd"
ln -s "$sumcastctl" "$work/bin/sumcastctl"
export PATH="$work/bin:$PATH"

run() {  # expected-exit message-pattern, env assignments before
  local want=$1 pattern=$2 rc=0
  SUMCAST_CONFIG=$config bash "$entrypoint" >"$work/out" 2>&1 || rc=$?
  [ "$rc" = "$want" ] || { cat "$work/out"; fail "$config: exit $rc, want $want"; }
  grep -q "$pattern" "$work/out" || { cat "$work/out"; fail "$config: no message matching '$pattern'"; }
  ! grep -q "starting sumcastd" "$work/out" || fail "$config: it went on to start sumcastd"
  echo "exit $rc: $(head -n 1 "$work/out")"
}

config=$work/absent.conf
run 64 "no configuration at $work/absent.conf"

printf 'port = { device = "net_null0"; ipv4 = "10.0.0.1"; mtu = 99999; };\n' >"$work/bad.conf"
config=$work/bad.conf
run 65 "invalid configuration: .*port.mtu"

printf 'a-token-of-more-than-16-bytes\n' >"$work/token"
chmod 600 "$work/token"
write_conf() {  # file huge_pages vdev [memory_mb]
  cat >"$1" <<CONF
eal = { lcores = "0,1"; memory_mb = ${4:-128}; huge_pages = "$2"; vdevs = [ "$3" ]; };
port = { device = "${3%%,*}"; ipv4 = "10.0.0.1"; };
control = { listen_address = "127.0.0.1"; port = 4790; token_file = "$work/token"; };
CONF
}
write_conf "$work/noif.conf" off "net_af_packet0,iface=sumcast-nonexistent0"
config=$work/noif.conf
run 67 "names interface sumcast-nonexistent0, which this container does not have"

# huge_pages = "on" asking for 1 TiB: refused whether hugetlbfs is mounted here (too few free) or not.
write_conf "$work/huge.conf" on "net_null0" 1048576
config=$work/huge.conf
run 66 'huge_pages = "on"'

# sumcastctl check --json: the settings (defaults filled in), or valid=false with the error.
"$sumcastctl" check --json "$work/huge.conf" >"$work/check.json"
/usr/bin/python3 - "$work/check.json" "$work/token" <<'PY' || fail "check --json does not show the settings"
import json, sys
c = json.load(open(sys.argv[1]))
assert c["valid"] is True, c
assert c["eal"]["huge_pages"] == "on" and c["eal"]["memory_mb"] == 1048576, c["eal"]
assert c["port"]["device"] == "net_null0" and c["port"]["mtu"] == 1500, c["port"]  # default mtu
assert c["control"]["token_file"] == sys.argv[2], c["control"]
assert c["dataplane"]["worker_cores"] == 1 and c["telemetry"]["prometheus_address"] == "", c
PY
rc=0; "$sumcastctl" check --json "$work/bad.conf" >"$work/bad.json" || rc=$?
[ $rc = 1 ] || fail "check --json of an invalid file exited $rc, want 1"
/usr/bin/python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); assert c["valid"] is False and "port.mtu" in c["error"], c' \
  "$work/bad.json" || fail "check --json of an invalid file does not say why"
"$sumcastctl" check "$work/huge.conf" | grep -q ": OK$" || fail "check (text) does not say OK"
rc=0; "$sumcastctl" stats --watch 0 >/dev/null 2>&1 || rc=$?
[ $rc = 2 ] || fail "stats --watch 0 is not a usage error (exit $rc)"
"$sumcastctl" --socket "$work/none.sock" version --json | /usr/bin/python3 -c '
import json, sys
v = json.load(sys.stdin)
assert v["daemon"] is None and v["sumcastctl"], v' || fail "version --json without a daemon"
echo "PASS: entrypoint refusals and sumcastctl check/version --json"
