"""Reads the JSON files Google Benchmark writes (sumcast_bench_engine, _kernels, _icrc): the one
reader of them for perf/plot.py and perf/report.py."""
import json
import re


def read(path, keep_errors=False):
    """(context, rows) of a Google Benchmark JSON file.

    rows maps a case's name (without "/manual_time" or "/iterations:N") to its row: the median
    aggregate where the case was repeated, else its first run. A case that failed is
    {"error": message} when keep_errors is true and absent otherwise.
    """
    with open(path) as f:
        data = json.load(f)
    rows, medians = {}, set()
    for b in data.get("benchmarks", []):
        name = re.sub(r"/(manual_time|iterations:\d+)", "", b.get("run_name", b["name"]))
        if b.get("error_occurred"):
            if keep_errors:
                rows[name] = {"error": b.get("error_message", "error")}
            continue
        if b.get("run_type") == "aggregate":
            if b.get("aggregate_name") != "median":
                continue
            rows[name] = b
            medians.add(name)
        elif name not in medians:
            rows.setdefault(name, b)
    return data.get("context", {}), rows
