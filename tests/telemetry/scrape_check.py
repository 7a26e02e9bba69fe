#!/usr/bin/python3
"""Checks a scrape of sumcastd's GET /metrics against sumcastctl's JSON (prometheus_scrape_test.sh).

usage: scrape_check.py METRICS STATS_BEFORE.json STATS_AFTER.json JOBS.json CHUNKS WORLD IDLE_JOB

The scrape was taken between the two `sumcastctl stats --json` reads, so every counter it shows must
lie between them (both read the same per-core counters). It must also parse as the text format,
show each core's histogram with cumulative buckets ending in +Inf == _count, the idle job IDLE_JOB
as registering, and the control-plane counters of `sumcastctl jobs --json`. CHUNKS x WORLD
contributions and CHUNKS completed slots are what the workers made. Exit 0 when all hold.
"""
import json
import math
import re
import sys

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|$)')
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg)


def parse(text):
    types, samples, order = {}, {}, []
    for line in text.splitlines():
        if not line:
            continue
        if line.startswith('# TYPE '):
            _, _, name, kind = line.split(' ', 3)
            types[name] = kind
            continue
        if line.startswith('#'):
            continue
        m = SAMPLE.match(line)
        if not m:
            fail('unparsable line: ' + line)
            continue
        name, labels_text, value = m.group(1), m.group(3) or '', m.group(4)
        labels = {}
        pos = 0
        while pos < len(labels_text):
            lm = LABEL.match(labels_text, pos)
            if not lm:
                fail('bad labels: ' + line)
                break
            labels[lm.group(1)] = lm.group(2).replace('\\n', '\n').replace('\\"', '"').replace('\\\\', '\\')
            pos = lm.end()
        family = re.sub(r'_(bucket|sum|count)$', '', name) if re.sub(r'_(bucket|sum|count)$', '', name) in types else name
        if family not in types:
            fail('sample without TYPE: ' + line)
        if order and order[-1] != family and family in order:
            fail('family not contiguous: ' + family)
        if not order or order[-1] != family:
            order.append(family)
        key = (name, tuple(sorted(labels.items())))
        if key in samples:
            fail('duplicate series: ' + line)
        samples[key] = math.inf if value == '+Inf' else float(value)
    return types, samples


def get(samples, name, **labels):
    return samples.get((name, tuple(sorted((k, str(v)) for k, v in labels.items()))))


def main():
    metrics_file, before_file, after_file, jobs_file, chunks, world, idle_job = sys.argv[1:8]
    chunks, world = int(chunks), int(world)
    types, samples = parse(open(metrics_file).read())
    before = json.load(open(before_file))
    after = json.load(open(after_file))
    jobs = json.load(open(jobs_file))

    cores = int(after['cores'])
    checked = 0
    total = {}
    for i in range(cores):
        b, a = before['per_core'][i], after['per_core'][i]
        for key, hi in a.items():
            if key in ('core', 'lcore'):
                continue
            lo = b[key]
            if key.startswith('drop_'):
                v = get(samples, 'sumcast_drops_total', core=i, reason=key[5:])
            elif key == 'jobs_active':
                v = get(samples, 'sumcast_jobs_active', core=i)
            else:
                v = get(samples, 'sumcast_%s_total' % key, core=i)
            if v is None:
                fail('core %d: %s missing from the scrape' % (i, key))
                continue
            if not lo <= v <= hi:
                fail('core %d: %s = %s, sumcastctl read %s then %s' % (i, key, v, lo, hi))
            total[key] = total.get(key, 0) + v
            checked += 1
        # The histogram counts every completed slot of this core.
        buckets = sorted((float(dict(k[1])['le']), v) for k, v in samples.items()
                         if k[0] == 'sumcast_slot_completion_seconds_bucket' and dict(k[1])['core'] == str(i))
        count = get(samples, 'sumcast_slot_completion_seconds_count', core=i)
        if not buckets or buckets[-1][0] != math.inf or buckets[-1][1] != count:
            fail('core %d: histogram does not end in +Inf == _count (%s)' % (i, buckets[-1:]))
        if any(buckets[j][1] > buckets[j + 1][1] for j in range(len(buckets) - 1)):
            fail('core %d: histogram buckets are not cumulative' % i)
        if not b['slots_completed'] <= count <= a['slots_completed']:
            fail('core %d: histogram count %s, slots_completed %s..%s' % (i, count, b['slots_completed'],
                                                                           a['slots_completed']))
        s = get(samples, 'sumcast_slot_completion_seconds_sum', core=i)
        if count > 0 and not 0 < s < 60 * count:
            fail('core %d: latency sum %s for %s slots' % (i, s, count))
    # The port's own counters and extended stats, labelled with its device.
    port_b, port_a = before.get('port'), after.get('port')
    if not port_a:
        fail('sumcastctl stats --json has no port counters')
    else:
        for key, hi in port_a.items():
            if key.startswith('xstat_'):
                v = [x for k, x in samples.items() if k[0] == 'sumcast_port_xstat_total' and dict(k[1])['name'] == key[6:]]
            else:
                v = [x for k, x in samples.items() if k[0] == 'sumcast_port_%s_total' % key]
            if len(v) != 1:
                fail('port: %s is %d series in the scrape, not one' % (key, len(v)))
            elif not port_b[key] <= v[0] <= hi:
                fail('port: %s = %s, sumcastctl read %s then %s' % (key, v[0], port_b[key], hi))
            checked += 1
        if port_a.get('ipackets', 0) == 0:
            fail('port: ipackets 0 after the workers ran')
    if types.get('sumcast_slot_completion_seconds') != 'histogram':
        fail('sumcast_slot_completion_seconds is not a histogram')
    if total.get('contributions') != chunks * world:
        fail('contributions over cores %s, the workers sent %d' % (total.get('contributions'), chunks * world))
    if total.get('slots_completed') != chunks:
        fail('slots_completed over cores %s, want %d' % (total.get('slots_completed'), chunks))

    # The idle job (one of two ranks registered) and the control-plane counters.
    idle = [j for k, j in jobs.items() if k.startswith('job') and isinstance(j, dict) and j.get('name') == idle_job]
    if len(idle) != 1:
        fail('sumcastctl jobs does not show the idle job ' + idle_job)
    else:
        j = idle[0]
        labels = dict(job_id=j['job_id'], job_name=idle_job)
        for metric, want in (('sumcast_job_world_size', j['world_size']), ('sumcast_job_registered_ranks', j['registered']),
                             ('sumcast_job_running', j['running']), ('sumcast_job_slots_completed_total', 0)):
            if get(samples, metric, **labels) != want:
                fail('%s%s = %s, want %s' % (metric, labels, get(samples, metric, **labels), want))
        if get(samples, 'sumcast_job_info', dtype=j['dtype'], op=j['op'], **labels) != 1:
            fail('sumcast_job_info missing for ' + idle_job)
    for key, v in jobs['server'].items():
        if get(samples, 'sumcast_control_%s_total' % key) != v:
            fail('control %s: scrape %s, sumcastctl %s' % (key, get(samples, 'sumcast_control_%s_total' % key), v))
            continue
        checked += 1
    if not any(k[0] == 'sumcast_build_info' for k in samples):
        fail('no sumcast_build_info')
    print('scrape_check: %d values match sumcastctl over %d core(s); %d series in the scrape' %
          (checked, cores, len(samples)))
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
