#!/usr/bin/env bash
# Two jobs at once on one appliance, different dtypes and world sizes, sharing the worker
# namespaces: job A bf16 on 4 ranks (w0..w3), job B int32 on 3 ranks (w0..w2), started together,
# every result checked (--check). Asserts: the appliance lists both jobs running and making progress
# at the same time (with their own dtypes); both exact; the appliance's contributions equal both jobs' chunks (no
# packet of one counted in the other) and no packet was dropped as belonging to another job
# (unknown job, Q_Key, source, rank, dtype); both jobs are freed afterwards.
#
# usage: two_jobs_test.sh SUMCASTD SUMCASTCTL ALLREDUCE IMPAIR
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../tools/lib/fail-loudly.sh"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"
shift 4

it_begin 4
it_start_appliance

# Long enough (seconds, even on an idle machine) for the poll below to see both running at once.
common=(--check --iters 20 --warmup 1 --counts "1,257,16385,65537,1048576")
it_ranks A job-a 4 --dtype bf16 "${common[@]}"
it_ranks B job-b 3 --dtype int32 "${common[@]}"

# Both registered and running at the same moment, each with its own dtype.
both_running() {
  "$SUMCASTCTL" --prefix "$TB_PREFIX" jobs --json >"$IT_WORK/jobs.json" 2>/dev/null || return 1
  jq -e '[to_entries[] | select(.key | startswith("job")) | .value | select(.running != 0 and .slots_completed > 0)
          | "\(.name)/\(.dtype)/\(.world_size)"] | sort == ["job-a/bf16/4", "job-b/int32/3"]' \
    "$IT_WORK/jobs.json" >/dev/null
}
it_until 30 both_running || { cat "$IT_WORK/jobs.json" 2>/dev/null; fail "the two jobs were never running at once"; }
note "both jobs running: $(jq -c '[to_entries[] | select(.key | startswith("job")) | .value | {name, dtype, world_size}]' "$IT_WORK/jobs.json")"

it_wait 60 || fail "the jobs did not finish within 60 s"
# it_wait fills IT_RC in launch order: A's 4 ranks, then B's 3.
rc_b=("${IT_RC[@]:4:3}")
IT_RC=("${IT_RC[@]:0:4}")
it_expect_exact A 4 5
IT_RC=("${rc_b[@]}")
it_expect_exact B 3 5
note "job A (bf16, 4 ranks) and job B (int32, 3 ranks) exact"

chunks=0
for i in 0 1 2 3; do chunks=$((chunks + $(it_counter A $i chunks))); done
for i in 0 1 2; do chunks=$((chunks + $(it_counter B $i chunks))); done
"$SUMCASTCTL" --prefix "$TB_PREFIX" stats --json >"$IT_WORK/stats.json"
got=$(jq -r .total.contributions "$IT_WORK/stats.json")
[ "$got" = "$chunks" ] || fail "appliance contributions $got, the two jobs sent $chunks chunks"
for d in unknown_job bad_qkey foreign_source bad_rank dtype_mismatch op_mismatch bad_range; do
  v=$(jq -r ".total.drop_$d" "$IT_WORK/stats.json")
  [ "$v" = 0 ] || fail "appliance dropped $v packets as $d: the jobs crossed"
done
it_until 10 bash -c "[ \"\$('$SUMCASTCTL' --prefix '$TB_PREFIX' stats --json | jq -r .total.jobs_active)\" = 0 ]" ||
  fail "jobs still active on the appliance"
started=$("$SUMCASTCTL" --prefix "$TB_PREFIX" jobs --json | jq -r .server.jobs_started)
[ "$started" = 2 ] || fail "appliance started $started jobs, want 2"
echo "PASS: two jobs at once (bf16 x 4 ranks, int32 x 3 ranks) exact; $chunks contributions, none crossed"
