#!/usr/bin/env bash
# sumcastd's Prometheus endpoint end to end on the namespace test bed (tools/testbed/testbed.sh):
# sumcastd with two engine cores on net_af_packet and telemetry.prometheus_address on the
# management address; 4 workers (sumcast_test_worker) make exact all-reduces, a fifth registers one
# rank of a two-rank job and waits (a registering job). Then GET /metrics with curl, between two
# `sumcastctl stats --json` reads: scrape_check.py parses the text and checks every per-core
# counter, drop reason, histogram count, the job gauges and the control-plane counters against
# sumcastctl. Also: HEAD, 404, and the index at /.
#
# usage: prometheus_scrape_test.sh SUMCASTD SUMCASTCTL TEST_WORKER
# Exit 77 (skipped) when not root or without curl.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../tools/lib/fail-loudly.sh"

sumcastd=$1 sumcastctl=$2 worker=$3
[ "$(id -u)" = 0 ] || { echo "skipped: needs root (network namespaces)"; exit 77; }
command -v curl >/dev/null || { echo "skipped: needs curl"; exit 77; }
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../../tools/testbed/testbed.sh
source "${SUMCAST_SOURCE_DIR:-$here/../..}/tools/testbed/testbed.sh"

N=4
CORES=2
METRICS_PORT=9790
work=$(mktemp -d /tmp/sumcast-prom.XXXXXX)
pid=""
worker_pids=()
idle_pid=""
cleanup() {
  local rc=$?
  for p in "${worker_pids[@]}" $idle_pid $pid; do kill -KILL "$p" 2>/dev/null || true; done
  [ -z "$pid" ] || wait "$pid" 2>/dev/null || true
  tb_down
  rm -rf "/var/run/dpdk/$TB_PREFIX"
  if [ $rc -ne 0 ]; then
    for f in "$work"/*.log; do [ -f "$f" ] && { echo "--- $f"; tail -40 "$f"; }; done
  fi
  rm -rf "$work"
  exit $rc
}
fail() { echo "FAIL: $*" >&2; exit 1; }

tb_up $((N + 1))
trap cleanup EXIT
tb_token "$work/token"
TB_HUGE=off tb_agg_conf "$work/agg.conf" "$work/token" af_packet
sed -i "s/worker_cores = 1;/worker_cores = $CORES;/; s/lcores = \"[^\"]*\";/lcores = \"0@0,1@1,2@0\";/" "$work/agg.conf"
cat >>"$work/agg.conf" <<CONF
telemetry = {
  prometheus_address = "$TB_MGMT_IP:$METRICS_PORT";
};
CONF
url="http://$TB_MGMT_IP:$METRICS_PORT"
scrape() { tb_exec w0 curl -sS --max-time 10 "$@"; }

ip netns exec "$(tb_ns app)" "$sumcastd" -c "$work/agg.conf" >"$work/sumcastd.log" 2>&1 &
pid=$!
tb_wait_line "$work/sumcastd.log" "^sumcastd: ready" 60 "$pid" || fail "sumcastd did not become ready"
grep -q "^sumcastd: telemetry: prometheus on $url/metrics" "$work/sumcastd.log" ||
  fail "no 'telemetry: prometheus on $url/metrics' line"

# --- before any job: the endpoint answers; errors are errors.
scrape "$url/metrics" >"$work/empty.prom"
grep -q '^sumcast_build_info{version="[^"]*",dpdk="DPDK [^"]*"} 1$' "$work/empty.prom" || fail "no build info"
grep -q '^sumcast_rx_packets_total{core="1"} ' "$work/empty.prom" || fail "no per-core series for core 1"
scrape "$url/" | grep -q "^/metrics " || fail "the index does not list /metrics"
[ "$(scrape -o /dev/null -w '%{http_code}' "$url/nothing")" = 404 ] || fail "unknown path is not 404"
head=$(scrape -I "$url/metrics")
echo "$head" | grep -qi '^content-type: text/plain; version=0.0.4' || fail "HEAD: no text format content type"

# --- traffic: 4 workers, exact sums; one rank of an idle two-rank job stays registered.
ip netns exec "$(tb_ns w$N)" "$worker" --control "$TB_MGMT_IP:4790" --token-file "$work/token" \
  --job idle-job --world 2 --rank 0 --ip "${TB_WORKER_IP[$N]}" --iface "$TB_WORKER_IF" \
  --timeout-ms 120000 >"$work/idle.log" 2>&1 &
idle_pid=$!
for ((i = 0; i < N; i++)); do
  ip netns exec "$(tb_ns w$i)" "$worker" --control "$TB_MGMT_IP:4790" --token-file "$work/token" \
    --job prom --world $N --rank $i --ip "${TB_WORKER_IP[$i]}" --iface "$TB_WORKER_IF" \
    --elements 30000 --collectives 3 --timeout-ms 90000 >"$work/w$i.log" 2>&1 &
  worker_pids+=($!)
done
for ((i = 0; i < N; i++)); do
  wait "${worker_pids[$i]}" || fail "worker $i exited with $? ($(tail -1 "$work/w$i.log"))"
done
worker_pids=()
chunks=$(sed -n 's/.* exact; \([0-9]*\) chunks.*/\1/p' "$work/w0.log")
[ -n "$chunks" ] && [ "$chunks" -gt 0 ] || fail "worker 0 did not report its chunks"
# Quiet state: the finished job left (its members' leave reached the control plane and the cores)
# and the idle job's rank registered. Bounded waits, no fixed sleeps.
deadline=$((SECONDS + 20))
until "$sumcastctl" --prefix "$TB_PREFIX" jobs | grep -q "jobs_completed 1" &&
  "$sumcastctl" --prefix "$TB_PREFIX" jobs | grep -q idle-job; do
  [ $SECONDS -lt $deadline ] || fail "the job did not complete or the idle job never registered"
  read -rt 0.1 <> <(:) || true
done

# --- the scrape between two reads of sumcastctl.
"$sumcastctl" --prefix "$TB_PREFIX" stats --json >"$work/before.json"
scrape "$url/metrics" >"$work/metrics.prom"
"$sumcastctl" --prefix "$TB_PREFIX" stats --json >"$work/after.json"
"$sumcastctl" --prefix "$TB_PREFIX" jobs --json >"$work/jobs.json"
/usr/bin/python3 "$here/scrape_check.py" "$work/metrics.prom" "$work/before.json" "$work/after.json" \
  "$work/jobs.json" "$chunks" "$N" idle-job || fail "the scrape does not match sumcastctl"
# Every metric the Grafana dashboard queries is in the scrape.
/usr/bin/python3 - "${SUMCAST_SOURCE_DIR:-$here/../..}/tools/grafana/sumcast-dashboard.json" "$work/metrics.prom" <<'PY' ||
import json, re, sys
dash = json.load(open(sys.argv[1]))
exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
names = set(re.findall(r"\b(sumcast_[a-z_]+)\b", " ".join(exprs)))
scraped = set(re.findall(r"^(sumcast_[a-z_]+)", open(sys.argv[2]).read(), re.M))
missing = sorted(n for n in names if n not in scraped)
print("dashboard: %d metrics queried, missing from the scrape: %s" % (len(names), missing or "none"))
sys.exit(1 if missing else 0)
PY
  fail "the dashboard queries metrics sumcastd does not export"
grep -E '^sumcast_(contributions_total|slots_completed_total|slot_completion_seconds_count)' "$work/metrics.prom"
grep -E '^sumcast_job_' "$work/metrics.prom"

# --- sumcastctl's live view (rates from successive reads) and version, as JSON and as text.
"$sumcastctl" --prefix "$TB_PREFIX" stats --watch 0.2 --count 2 --json >"$work/watch.json"
[ "$(wc -l <"$work/watch.json")" = 2 ] || fail "stats --watch --count 2 --json did not print 2 lines"
/usr/bin/python3 -c '
import json, sys
for line in open(sys.argv[1]):
    w = json.loads(line)
    assert len(w["cores"]) == int(sys.argv[2]) and w["seconds"] > 0, w
    assert any(j["name"] == "idle-job" for j in w["jobs"]), w
' "$work/watch.json" "$CORES" || fail "stats --watch --json lines are not the rates"
"$sumcastctl" --prefix "$TB_PREFIX" stats --watch 0.2 --count 1 | tee "$work/watch.txt"
grep -q "^total " "$work/watch.txt" || fail "stats --watch shows no total row"
grep -q "idle-job" "$work/watch.txt" || fail "stats --watch shows no jobs"
"$sumcastctl" --prefix "$TB_PREFIX" version --json | /usr/bin/python3 -c '
import json, sys
v = json.load(sys.stdin)
assert v["daemon"]["sumcastd"] == v["sumcastctl"] and v["daemon"]["dpdk"].startswith("DPDK"), v
' || fail "version --json does not show the daemon"

kill -TERM "$pid"
rc=0; wait "$pid" || rc=$?
pid=""
[ $rc -eq 0 ] || fail "sumcastd exited with $rc after SIGTERM"
echo "PASS: Prometheus scrape of $CORES cores matches sumcastctl ($chunks chunks x $N workers)"
