#!/usr/bin/env python3
"""Checks what `stallprof run` recorded of a workload against the WORKLOAD line
the workload script printed (scripts/workloads/synthetic.py). The records are
the trace as JSON lines (`trace_check --jsonl trace.pb`). Exits 1 with one line
per failed expectation.

usage: check_capture.py TRACE.jsonl WORKLOAD_OUTPUT --workers N --epochs N
                        [--client cext|ctypes] [--persistent] [--file-bytes N]

Where this machine has /proc/thread-self/io, every fetch span with CPU time
must be followed in its thread by one read_storage, one read_calls and one
system_cpu span that contain it, and a fetch span without CPU by none;
every wait and fetch span carries CPU time unless the trace says the counter
budget sampled them (config counter_share), and then at least one does;
--file-bytes N (a --files workload) also wants the train loader's read_calls to
count at least batch_size * N bytes per batch.
"""
import argparse
import collections
import json
import os
import sys


def check_reads(loader, fetches, storage, calls, system, min_read, expect):
    """One read_storage, one read_calls and one system_cpu span per fetch span,
    in its thread, containing it; read_calls >= min_read bytes; system CPU no
    more than the fetch's CPU (plus the tick-based split's slack)."""
    def end(r):
        return r["start"] + r["dur"]

    def containing(reads, f):
        return [r for r in reads if (r["pid"], r["tid"]) == (f["pid"], f["tid"])
                and r["start"] <= f["start"] and end(r) >= end(f)]

    expect(len(storage) == len(fetches) and len(calls) == len(fetches),
           "%s: %d read_storage and %d read_calls spans for %d fetch spans"
           % (loader, len(storage), len(calls), len(fetches)))
    expect(len(system) == len(fetches), "%s: %d system_cpu spans for %d fetch spans" % (loader, len(system), len(fetches)))
    bad = 0
    short = []
    system_total = cpu_total = 0
    for f in fetches:
        s, c, k = containing(storage, f), containing(calls, f), containing(system, f)
        if len(s) != 1 or len(c) != 1 or len(k) != 1:
            bad += 1
            continue
        if c[0]["arg"] < min_read:
            short.append(c[0]["arg"])
        system_total += k[0]["arg"]
        cpu_total += f["cpu"]
    expect(bad == 0, "%s: %d fetch spans without exactly one containing read_storage/read_calls/system_cpu span"
           % (loader, bad))
    expect(not short, "%s: read_calls below %d bytes per batch: %s" % (loader, min_read, short[:5]))
    # getrusage splits exact CPU time by ticks: per span it can exceed the
    # span's CPU, summed over the loader it cannot by much.
    expect(system_total <= cpu_total * 1.2 + 20_000_000,
           "%s: system CPU %d ns exceeds the fetch spans' CPU %d ns" % (loader, system_total, cpu_total))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("capture")
    p.add_argument("workload_output")
    p.add_argument("--workers", type=int, required=True)
    p.add_argument("--epochs", type=int, required=True)
    p.add_argument("--client", default="cext")
    p.add_argument("--persistent", action="store_true")
    p.add_argument("--file-bytes", type=int, default=0, help="the train loader reads one file of N bytes per sample")
    a = p.parse_args()

    failures = []

    def expect(ok, what):
        if not ok:
            failures.append(what)

    workload = None
    for line in open(a.workload_output):
        if line.startswith("WORKLOAD "):
            workload = json.loads(line[len("WORKLOAD "):])
    if workload is None:
        print("FAIL: no WORKLOAD line in %s" % a.workload_output)
        return 1
    records = [json.loads(line) for line in open(a.capture)]
    summary = [r for r in records if r["type"] == "summary"]
    expect(len(summary) == 1, "one summary line")
    if summary:
        expect(summary[0]["dropped"] == 0, "no drops (got %d)" % summary[0]["dropped"])
        expect(summary[0]["invalid"] == 0, "no invalid records (got %d)" % summary[0]["invalid"])
        expect(summary[0]["footer"] and not summary[0]["truncated"], "the trace is complete (footer, not truncated)")

    configs = collections.defaultdict(dict)
    for r in records:
        if r["type"] == "config":
            configs[r["scope"]][r["key"]] = r.get("u64", r.get("str", r.get("f64")))
    # Scope 0 holds the process's own keys (the hook's cost, timed at start), not a loader.
    own = configs.pop(0, {})
    for key in ("hook_ns_wait", "hook_ns_fetch", "hook_ns_sample", "hook_ns_collate"):
        expect(isinstance(own.get(key), int), "the hook recorded its own cost %s at start (got %r)" % (key, own.get(key)))
    # A batch of one sample costs fetch + sample + collate; the C fetch replaces
    # torch's Python one, so its spans' cost is net of what that saves, and the
    # split between them is not checked.
    expect(own.get("hook_ns_wait", 0) > 0
           and own.get("hook_ns_fetch", 0) + own.get("hook_ns_sample", 0) + own.get("hook_ns_collate", 0) > 0,
           "the hook's own cost per next() and per batch is positive: %r" % own)
    expect(not any(r.get("name", "").startswith("stallprof.calibration.") and r["scope"] != 0 for r in records),
           "calibration spans carry no loader scope")
    scope_of = {cfg.get("name"): scope for scope, cfg in configs.items()}
    by = collections.defaultdict(list)  # (name, scope) -> records
    for r in records:
        if r["type"] in ("span", "instant"):
            by[(r["name"], r["scope"])].append(r)

    thread_io = os.path.exists("/proc/thread-self/io")
    # The counter budget skipped some spans' counters (docs/analysis.md "Sampled counters").
    sampled = "counter_share" in own
    measured = all if not sampled else any
    waits_all = [r for r in records if r.get("name") == "dataloader.wait"]
    main_pids = {r["pid"] for r in waits_all}
    expect(len(main_pids) == 1, "wait spans come from one (main) process, got %s" % main_pids)

    expect(set(scope_of) == set(workload["iterations"]),
           "loaders named %s, expected %s" % (sorted(map(str, scope_of)), sorted(workload["iterations"])))
    for loader, iterations in workload["iterations"].items():
        scope = scope_of.get(loader)
        if scope is None:
            continue
        cfg = configs[scope]
        expect(cfg.get("client") == a.client, "%s: client %r, expected %r" % (loader, cfg.get("client"), a.client))
        expect(cfg.get("num_workers") == a.workers, "%s: num_workers config %r" % (loader, cfg.get("num_workers")))
        expect(cfg.get("batch_size") == workload["batch_size"], "%s: batch_size config" % loader)
        for key in ("prefetch_factor", "pin_memory", "persistent_workers", "sampler", "drop_last", "dataset_len",
                    "multiprocessing_context"):
            expect(key in cfg, "%s: config %s recorded" % (loader, key))
        # torch.multiprocessing's, Linux's default unless the script chose another.
        expect(cfg.get("sharing_strategy") in ("file_descriptor", "file_system"),
               "%s: sharing_strategy config %r" % (loader, cfg.get("sharing_strategy")))
        waits = by[("dataloader.wait", scope)]
        expect(len(waits) == iterations, "%s: %d wait spans, script counted %d" % (loader, len(waits), iterations))
        expect(measured(w["has_cpu"] for w in waits),
               "%s: %s wait span carries CPU time" % (loader, "no" if sampled else "not every"))
        expect(all(w["cpu"] <= w["dur"] + 2_000_000 for w in waits), "%s: wait CPU <= wall" % loader)
        per_epoch = workload["per_epoch"][loader]
        expected_args = [i for n in per_epoch for i in range(n)]
        expect([w["arg"] for w in waits] == expected_args, "%s: wait args are the iteration indices" % loader)
        epochs = by[("dataloader.epoch", scope)]
        expect([e["arg"] for e in epochs] == list(range(a.epochs)), "%s: epoch spans %s" % (loader, [e["arg"] for e in epochs]))
        expect(all(e["type"] == "span" for e in epochs), "%s: epochs are spans (__iter__ call to iterator)" % loader)
        expect(all(e["type"] == "span" for e in by[("dataloader.epoch_end", scope)]),
               "%s: epoch_end is a span (the StopIteration next())" % loader)
        ends = by[("dataloader.epoch_end", scope)]
        expect([e["arg"] for e in ends] == per_epoch, "%s: epoch_end args %s, expected %s" % (loader, [e["arg"] for e in ends], per_epoch))
        fetches = by[("dataloader.fetch", scope)]
        expect(len(fetches) == iterations, "%s: %d fetch spans for %d iterations" % (loader, len(fetches), iterations))
        expect(measured(f["has_cpu"] and f["cpu"] > 0 for f in fetches),
               "%s: %s fetch span carries CPU time" % (loader, "no" if sampled else "not every"))
        expect(all(f["cpu"] <= f["dur"] + 2_000_000 for f in fetches), "%s: fetch CPU <= wall" % loader)
        # A fetch's arg is its batch index in the epoch (the handoff rule pairs it with next()).
        expect(sorted(f["arg"] for f in fetches) == sorted(expected_args),
               "%s: fetch args are not each epoch's batch indices: %s" % (loader, sorted(f["arg"] for f in fetches)[:12]))
        getitems = by[("dataloader.getitem", scope)]
        expect(len(getitems) == cfg.get("dataset_len", -1) * a.epochs,
               "%s: %d getitem spans, expected dataset_len x epochs" % (loader, len(getitems)))
        expect(len(by[("dataloader.collate", scope)]) == iterations, "%s: one collate span per batch" % loader)
        if thread_io:
            min_read = workload["batch_size"] * a.file_bytes if loader == "train" else 0
            reads = [by[("dataloader.read_storage", scope)], by[("dataloader.read_calls", scope)],
                     by[("dataloader.system_cpu", scope)]]
            check_reads(loader, [f for f in fetches if f["has_cpu"]], *reads, min_read, expect)
            skipped_with_reads = [f for f in fetches if not f["has_cpu"] and any(
                (r["pid"], r["tid"]) == (f["pid"], f["tid"]) and r["start"] <= f["start"]
                and r["start"] + r["dur"] >= f["start"] + f["dur"] for kind in reads for r in kind)]
            expect(not skipped_with_reads, "%s: %d fetch spans without CPU have read spans (counters are all or none)"
                   % (loader, len(skipped_with_reads)))
        fetch_pids = {f["pid"] for f in fetches}
        starts = by[("dataloader.worker_start", scope)]
        if a.workers == 0:
            expect(fetch_pids <= main_pids, "%s: num_workers=0 fetches in the main process" % loader)
            expect(not starts, "%s: no worker_start without workers" % loader)
        else:
            expect(not (fetch_pids & main_pids), "%s: fetches happen in workers, not the main process" % loader)
            launches = 1 if a.persistent else a.epochs
            expect(len(starts) == a.workers * launches,
                   "%s: %d worker_start instants, expected %d" % (loader, len(starts), a.workers * launches))
            expect(sorted(s["arg"] for s in starts) == sorted(list(range(a.workers)) * launches),
                   "%s: worker_start args are worker ids" % loader)
            expect(fetch_pids <= {s["pid"] for s in starts}, "%s: fetching workers announced themselves" % loader)
            expect(len({s["pid"] for s in starts}) == a.workers * launches, "%s: one process per worker start" % loader)
    if len(scope_of) > 1:
        expect(len(set(scope_of.values())) == len(scope_of), "distinct loaders get distinct scopes")
    flag = {"cext": 1, "ctypes": 2}[a.client]
    threads = [r for r in records if r["type"] == "thread"]
    expect(threads and all(t["flags"] == flag for t in threads), "every lane says client %s" % a.client)

    for f in failures:
        print("FAIL: " + f)
    if not failures:
        print("OK: %d records, loaders %s" % (len(records), {k: v for k, v in scope_of.items()}))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
