#!/usr/bin/env bash
# tools/verbs-check refuses clearly where it cannot run: no RDMA device (a missing and an empty
# device directory), a named device that is not there, missing required arguments. Each refusal
# exits 2 with a message naming the cause, and starts nothing (the sumcast-allreduce it would run
# is a stand-in that records being called). Where an RDMA device exists, the real check is run by
# hand against an appliance (docs/deployment.md).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../tools/lib/fail-loudly.sh"
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cat >"$work/allreduce" <<STUB
#!/bin/sh
echo called >"$work/called"
STUB
chmod +x "$work/allreduce"
mkdir -p "$work/empty" "$work/one/mlx5_0"
args=(--appliance 10.0.0.1:4790 --token-file /dev/null --bind 10.0.0.2 --allreduce "$work/allreduce")

# expect WANT_RC PATTERN [env...] -- args...: runs verbs-check, checks its status and message.
expect() {
  local want=$1 pattern=$2 rc=0
  shift 2
  env "$@" >"$work/out" 2>&1 || rc=$?
  [ "$rc" = "$want" ] || fail "exit $rc, want $want: $(cat "$work/out")"
  grep -q -- "$pattern" "$work/out" || fail "no '$pattern' in: $(cat "$work/out")"
  [ ! -e "$work/called" ] || fail "sumcast-allreduce was started"
  echo "ok: $pattern"
}
expect 2 "no RDMA device ($work/none is empty or missing)" VERBS_CHECK_SYSFS="$work/none" "$root/tools/verbs-check" "${args[@]}"
expect 2 "no RDMA device ($work/empty is empty or missing)" VERBS_CHECK_SYSFS="$work/empty" "$root/tools/verbs-check" "${args[@]}"
expect 2 "RDMA device 'mlx5_9' is not in $work/one (there: mlx5_0 )" VERBS_CHECK_SYSFS="$work/one" \
  "$root/tools/verbs-check" "${args[@]}" --rdma-device mlx5_9
expect 2 "--appliance, --token-file and --bind are required" VERBS_CHECK_SYSFS="$work/one" "$root/tools/verbs-check" --bind 10.0.0.2
expect 2 "unknown argument '--frob'" VERBS_CHECK_SYSFS="$work/one" "$root/tools/verbs-check" --frob
# This machine: whatever it has, the check either refuses for want of a device or would run.
if [ -z "$(ls -A /sys/class/infiniband 2>/dev/null || true)" ]; then
  expect 2 "no RDMA device (/sys/class/infiniband" "$root/tools/verbs-check" "${args[@]}"
else
  echo "note: this host has RDMA devices; the refusal on the real sysfs was not exercised"
fi
echo "PASS: verbs-check refuses without an RDMA device, a named device or its arguments"
