# shellcheck shell=bash
# Shared by the integration scripts in this folder (sourced, not run). The real appliance
# (sumcastd on net_af_packet in the test bed's appliance namespace, tools/testbed/testbed.sh) and
# real workers (sumcast-allreduce, one process per rank, each in its own worker namespace).
#
# Every script is called as `script SUMCASTD SUMCASTCTL ALLREDUCE IMPAIR [ARGS...]`, sources this
# file (which takes the four programs from $1..$4) and shifts them off. Then
#   it_begin N                      root check (exit 77 otherwise), test bed with N workers, token,
#                                   agg.conf ($IT_WORK/agg.conf; IT_JOB_TIMEOUT_MS, IT_CONF_EXTRA,
#                                   TB_PORT_EXTRA); IT_BED=routed: the routed bed (tb_up_routed)
#   it_start_appliance              starts sumcastd, waits (bounded) for "ready"
#   it_ranks TAG JOB WORLD ARGS...  starts ranks 0..WORLD-1 of one job, rank i in namespace w<i>;
#                                   appends their PIDs to IT_PIDS, logs in $IT_WORK/TAG.r<i>.log
#   it_wait SECS                    waits for every PID in IT_PIDS (deadline SECS): IT_RC[i] is the
#                                   exit status, IT_EXIT_AT[i] the time it was seen gone
#                                   ($EPOCHREALTIME); returns 1 (and kills the rest) at the deadline
#   it_expect_exact TAG WORLD [ROWS]  every rank of TAG exited 0; rank 0's table (ROWS rows) is exact
#   it_counter TAG RANK NAME        a worker counter from rank RANK's "# counters" line (0 if absent)
#   it_stat NAME                    an appliance total from `sumcastctl stats --json`
#   it_until SECS CMD...            runs CMD until it succeeds; fails at the deadline
#   it_impair_start TAG SEED DURATION_S ARGS...  sumcast-impair (IMPAIR) on NFQUEUE 1 and 2 of
#                                   every worker namespace (it_impair_rules adds the rules), seeds
#                                   SEED + 2w + q, logs $IT_WORK/impair.TAGw<w>.q<q>.log, PIDs in
#                                   IT_IMPAIR_PIDS; it_impair_stop stops them (SIGTERM: they release
#                                   what they hold and print their counters) within 10 s, and
#                                   it_impair_sum TAG FIELD QUEUE sums one counter over the workers;
#                                   it_impair_rules adds the NFQUEUE rules, once
# Cleanup (EXIT trap): every process started here is killed by PID, the namespaces are removed, and
# so is sumcastd's EAL runtime directory; on failure the logs are printed.

# shellcheck disable=SC2034  # IMPAIR is for the scripts that use it
SUMCASTD=$1 SUMCASTCTL=$2 ALLREDUCE=$3 IMPAIR=$4
IT_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
IT_ROOT=${SUMCAST_SOURCE_DIR:-$IT_HERE/../..}
# shellcheck source=../../tools/testbed/testbed.sh
source "$IT_ROOT/tools/testbed/testbed.sh"

IT_WORK=""
IT_APP_PID=""
IT_PIDS=()
IT_RC=()
IT_EXIT_AT=()
IT_EXTRA_PIDS=()  # helpers (sumcast-impair): killed at cleanup
IT_T0=$SECONDS
# Every wait below also stops at this many seconds from the start (below ctest's TIMEOUT, so that
# the cleanup always runs).
IT_LIMIT_S=${IT_LIMIT_S:-150}

IT_FAILED=
fail() {
  IT_FAILED="FAIL: $*"
  echo "$IT_FAILED" >&2
  exit 1
}
note() { printf '[%3ds] %s\n' $((SECONDS - IT_T0)) "$*"; }

_it_cleanup() {
  local rc=$? p f
  for p in "${IT_PIDS[@]}" "${IT_EXTRA_PIDS[@]}" $IT_APP_PID; do
    kill -KILL "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  tb_down
  rm -rf "/var/run/dpdk/$TB_PREFIX"  # EAL leaves its runtime directory behind
  if [ $rc -ne 0 ] && [ -n "$IT_WORK" ]; then
    for f in "$IT_WORK"/*.log; do
      [ -f "$f" ] || continue
      echo "--- $(basename "$f") (last 40 lines)"
      tail -n 40 "$f"
    done
    # Again after the logs: CI shows only the end of a failed test's output.
    [ -z "$IT_FAILED" ] || echo "$IT_FAILED (repeated after the logs above)"
  fi
  [ -z "$IT_WORK" ] || rm -rf "$IT_WORK"
  exit $rc
}

it_begin() {
  local n=$1
  [ "$(id -u)" = 0 ] || { echo "skipped: needs root (network namespaces)"; exit 77; }
  command -v jq >/dev/null || { echo "skipped: needs jq"; exit 77; }
  IT_WORK=$(mktemp -d /tmp/sumcast-integ.XXXXXX)
  local up=tb_up
  [ "${IT_BED:-flat}" = routed ] && up=tb_up_routed
  if ! $up "$n"; then
    trap _it_cleanup EXIT
    fail "test bed did not come up"
  fi
  trap _it_cleanup EXIT  # after tb_up, which sets its own EXIT trap; ours calls tb_down too
  tb_token "$IT_WORK/token"
  TB_JOB_TIMEOUT_MS=${IT_JOB_TIMEOUT_MS:-3000} tb_agg_conf "$IT_WORK/agg.conf" "$IT_WORK/token" "${IT_PMD:-af_packet}" \
    "${IT_CONF_EXTRA:-}"
}

it_start_appliance() {
  # A restart's wait must not find the last sumcastd's "ready": the `&` below truncates the log
  # only once its subshell runs, which may be after the wait first looks. The old log is kept.
  [ ! -f "$IT_WORK/sumcastd.log" ] || mv "$IT_WORK/sumcastd.log" "$IT_WORK/sumcastd.$(date +%s%N).log"
  ip netns exec "$(tb_ns app)" "$SUMCASTD" -c "$IT_WORK/agg.conf" >"$IT_WORK/sumcastd.log" 2>&1 &
  IT_APP_PID=$!
  tb_wait_line "$IT_WORK/sumcastd.log" "^sumcastd: ready" 60 "$IT_APP_PID" || fail "sumcastd did not become ready"
  note "sumcastd ready (pid $IT_APP_PID, $(grep -o 'memory: [^ ]*' "$IT_WORK/sumcastd.log" | head -1))"
}

# it_ranks TAG JOB WORLD [sumcast-allreduce options...]
it_ranks() {
  local tag=$1 job=$2 world=$3 i
  shift 3
  for ((i = 0; i < world; i++)); do
    # `ip netns exec` execs the program: $! is sumcast-allreduce's own PID.
    ip netns exec "$(tb_ns "w$i")" "$ALLREDUCE" --appliance "$TB_MGMT_IP:4790" --token-file "$IT_WORK/token" \
      --job "$job" --rank "$i" --world "$world" --bind "${TB_WORKER_IP[$i]}" "$@" >"$IT_WORK/$tag.r$i.log" 2>&1 &
    IT_PIDS+=($!)
  done
}

_it_limit() { [ $((SECONDS - IT_T0)) -lt "$IT_LIMIT_S" ] || fail "the test ran past its ${IT_LIMIT_S} s limit"; }

# _it_alive PID: whether PID runs (a zombie, exited and not yet reaped, does not). Builtins only:
# it_wait polls every rank this way while the ranks work on the same 2 CPUs.
_it_alive() {
  local stat
  { read -r stat <"/proc/$1/stat"; } 2>/dev/null || return 1
  [[ ${stat##*) } != Z* ]]
}

# it_impair_start TAG SEED DURATION_S ARGS...: one sumcast-impair per worker namespace and queue
# (1: contributions, OUTPUT; 2: results, INPUT), each with its own seed; bounded wait for each to
# bind its queue. it_impair_rules adds the NFQUEUE rules (--queue-bypass: traffic passes unimpaired
# while no process holds the queue). Not in a subshell: it_impair_stop waits for its children.
IT_IMPAIR_PIDS=()
it_impair_start() {
  local tag=$1 seed=$2 duration=$3 i q log
  shift 3
  IT_IMPAIR_PIDS=()
  for ((i = 0; i < ${#TB_WORKER_IP[@]}; i++)); do
    for q in 1 2; do
      log=$IT_WORK/impair.${tag}w$i.q$q.log
      ip netns exec "$(tb_ns "w$i")" "$IMPAIR" --queue $q --seed $((seed + i * 2 + q)) --duration-s "$duration" "$@" \
        >"$log" 2>&1 &
      IT_IMPAIR_PIDS+=($!)
      IT_EXTRA_PIDS+=($!)
      tb_wait_line "$log" "^sumcast-impair: queue" 10 $! || fail "sumcast-impair did not start ($log)"
    done
  done
}

# it_impair_rules: every worker's Sumcast traffic through NFQUEUE 1 (contributions out) and 2
# (results in); --queue-bypass lets it pass unimpaired while no sumcast-impair holds the queue.
it_impair_rules() {
  local i
  for ((i = 0; i < ${#TB_WORKER_IP[@]}; i++)); do
    tb_exec "w$i" iptables -A OUTPUT -p udp --dport 4791 -j NFQUEUE --queue-num 1 --queue-bypass
    tb_exec "w$i" iptables -A INPUT -p udp --sport 4791 -j NFQUEUE --queue-num 2 --queue-bypass
  done
}

# it_impair_stop: SIGTERM to every sumcast-impair of it_impair_start; fails when one has not
# exited 10 s later or exited non-zero.
it_impair_stop() {
  local p deadline=$((SECONDS + 10))
  for p in "${IT_IMPAIR_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${IT_IMPAIR_PIDS[@]}"; do
    while _it_alive "$p"; do
      [ $SECONDS -lt $deadline ] || fail "sumcast-impair $p did not stop"
      tb_pause 0.02
    done
    wait "$p" || fail "sumcast-impair $p exited with $?"
  done
  IT_IMPAIR_PIDS=()
}

# it_impair_sum TAG FIELD QUEUE: counter FIELD (dropped, delayed, reordered, overflow, ...) summed
# over the workers' sumcast-impair on QUEUE, from the line each printed when stopped.
it_impair_sum() {
  local i s=0 v log
  for ((i = 0; i < ${#TB_WORKER_IP[@]}; i++)); do
    log=$IT_WORK/impair.$1w$i.q$3.log
    v=$(sed -n "s/^sumcast-impair: received .* $2 \([0-9]*\).*/\1/p" "$log")
    [ -n "$v" ] || fail "no counters from sumcast-impair ($log)"
    s=$((s + v))
  done
  echo $s
}

# it_wait SECS: waits for every PID in IT_PIDS, then empties IT_PIDS.
it_wait() {
  local deadline=$((SECONDS + $1)) i live n=${#IT_PIDS[@]}
  IT_RC=()
  IT_EXIT_AT=()
  while :; do
    live=0
    for ((i = 0; i < n; i++)); do
      [ -n "${IT_EXIT_AT[$i]:-}" ] && continue
      if _it_alive "${IT_PIDS[$i]}"; then live=1; else IT_EXIT_AT[i]=$EPOCHREALTIME; fi
    done
    [ $live = 1 ] || break
    if [ $SECONDS -ge $deadline ]; then
      echo "it_wait: still running after $1 s: ${IT_PIDS[*]}" >&2
      for ((i = 0; i < n; i++)); do kill -KILL "${IT_PIDS[$i]}" 2>/dev/null || true; done
      for ((i = 0; i < n; i++)); do wait "${IT_PIDS[$i]}" 2>/dev/null || true; done
      IT_PIDS=()
      return 1
    fi
    _it_limit
    tb_pause 0.02
  done
  for ((i = 0; i < n; i++)); do
    IT_RC[i]=0
    wait "${IT_PIDS[$i]}" || IT_RC[i]=$?
  done
  IT_PIDS=()
}

# it_expect_exact TAG WORLD [ROWS]: after it_wait, every rank exited 0 and rank 0's table has rows
# (ROWS of them when given), none with a wrong element.
it_expect_exact() {
  local tag=$1 world=$2 want_rows=${3:-} i rows
  for ((i = 0; i < world; i++)); do
    [ "${IT_RC[$i]}" = 0 ] ||
      fail "$tag: rank $i exited ${IT_RC[$i]}: $(grep '^sumcast-allreduce:' "$IT_WORK/$tag.r$i.log" | tail -n 1)"
    grep -q "wrong elements" "$IT_WORK/$tag.r$i.log" && fail "$tag: rank $i counted wrong elements"
  done
  rows=$(grep -c '^ *[0-9]' "$IT_WORK/$tag.r0.log" || true)
  [ "$rows" -gt 0 ] || fail "$tag: rank 0 printed no result rows"
  [ -z "$want_rows" ] || [ "$rows" = "$want_rows" ] || fail "$tag: rank 0 printed $rows rows, want $want_rows"
  # Column 8 is #wrong; --check prints a number there.
  awk '/^ *[0-9]/ && $8 != "0" { bad = 1 } END { exit bad }' "$IT_WORK/$tag.r0.log" ||
    fail "$tag: rank 0's table has wrong elements or no check"
}

# it_counter TAG RANK NAME: a counter from that rank's "# counters of rank R:" line; 0 when absent.
# Bash builtins only: tests read hundreds of counters (multicast_flood 493), and a grep | tr | sed
# pipeline per counter (40 ms each on 2 busy CPUs) took 20 of that test's 50 s.
it_counter() {
  local line="" w words=()
  while IFS= read -r line || [ -n "$line" ]; do
    [[ $line == "# counters of rank"* ]] && break
    line=""
  done <"$IT_WORK/$1.r$2.log"
  read -ra words <<<"$line"
  for w in "${words[@]}"; do
    [[ $w == "$3="* ]] && { echo "${w#*=}"; return 0; }
  done
  echo 0
}

it_stats_json() { "$SUMCASTCTL" --prefix "$TB_PREFIX" stats --json; }
it_jobs_json() { "$SUMCASTCTL" --prefix "$TB_PREFIX" jobs --json; }
it_stat() { it_stats_json | jq -r ".total.$1 // 0"; }

# it_until SECS CMD...: retries CMD (a condition) until it succeeds or SECS pass.
it_until() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@"; do
    [ $SECONDS -lt $deadline ] || return 1
    _it_limit
    tb_pause 0.05
  done
}

# it_elapsed_ms START_EPOCHREALTIME END_EPOCHREALTIME
it_elapsed_ms() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%d", (b - a) * 1000 }'; }
