"""One chaos run end to end, and its report: the schedule, the cluster, the workload, both checkers.

What it models
    :func:`chaos_run` draws the fault schedule, starts the cluster (:mod:`.cluster`), runs the workload with
    the faults (:mod:`.workload`), saves ``faults.json``, ``history.jsonl`` and ``summary.json`` in the
    run's folder, and judges the history: the anomalies (:mod:`.anomalies`) and the validation against the
    spec (:mod:`.validate` for the partitions, :mod:`.coordination` and :mod:`.groups` for the transaction and group
    coordinators).
    :func:`judge` does the judging alone, for a saved history. :func:`verdict`
    maps a summary to the exit status (0 clean, 1 an anomaly or an unexplained history, 3 a validation
    whose budget ran out); :func:`render` and :func:`html_page` show it, the page with a timeline of the
    faults and the calls and each anomaly's witness marked on it.

Leaves out
    Brokers other than real Kafka (a single-node broker cannot lose a node; the audit covers those).
"""

from __future__ import annotations

import html
import json
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from txnspec.audit.chaos import anomalies, coordination, faults, groups, history, validate, workload
from txnspec.audit.chaos.cluster import FOREIGN, SETTINGS, foreign_cluster, kafka_cluster, serve_cluster


def judge(events: list[history.Event], transaction_version: int) -> dict[str, Any]:
    """Both checkers over a history: the anomalies with their witnesses, the validation's verdict."""
    started = time.perf_counter()
    found, checked = anomalies.check(events)
    anomaly_seconds = time.perf_counter() - started
    verdict = validate.validate(events, transaction_version)
    ops = history.pair(events)
    txns = anomalies.fates(ops)
    started = time.perf_counter()
    clients = {str(op.invoke.value.get("tid")): str(op.invoke.value.get("client", "")) for op in ops if op.f == "init"}
    tv_of = {tid: transaction_version if client != "librdkafka" else min(transaction_version, 1)
             for tid, client in clients.items()}
    coordinator = coordination.validate_coordinator(ops, txns, verdict.decisions, transaction_version, tv_of)
    offsets = groups.validate_groups(ops, txns, anomalies.final_reads(ops), verdict.decisions)
    coordination_seconds = time.perf_counter() - started
    fates = Counter(t.fate for t in txns.values())
    calls = Counter(f"{op.f}:{op.outcome}" for op in ops if not history.is_nemesis(op.process))
    injected = sorted((op for op in ops if history.is_nemesis(op.process) and op.outcome == "ok"),
                      key=lambda op: op.invoke.time)
    return {"anomalies": [a.to_json() for a in found], "checked": checked,
            "anomaly_counts": dict(Counter(a.kind for a in found)), "validation": verdict.to_json(),
            "coordinator": coordinator.to_json(), "groups": offsets.to_json(),
            "seconds_coordination": round(coordination_seconds, 3),
            "transactions": dict(fates), "calls": dict(sorted(calls.items())),
            "faults_injected": [op.invoke.value.get("fault", op.f) for op in injected],
            "seconds_anomalies": round(anomaly_seconds, 3)}


VALIDATIONS = ("validation", "coordinator", "groups")  # the partitions, the transaction and group coordinators


def verdict(summary: dict[str, Any]) -> int:
    checks = [summary[k] for k in VALIDATIONS if k in summary]  # a summary saved before the coordinators' check
    if summary["anomalies"] or any(not v["explained"] and v["complete"] for v in checks):
        return 1
    if any(not v["explained"] for v in checks):
        return 3
    return 0


SERVE_BROKERS = {"serve": False, "serve:durable": True}


def chaos_run(version: str | None, nodes: int, transaction_version: int, seconds: float,
              kinds: tuple[faults.FaultKind, ...], seed: int, out: Path,
              say: Callable[[str], None] = lambda text: None, broker: str = "kafka") -> dict[str, Any]:
    """One run on Kafka ``version`` (None: the newest 4.x) with ``nodes`` nodes, or on ``txnspec serve`` as one
    node when ``broker`` is ``serve`` (in memory) or ``serve:durable``."""
    kafka = broker not in (*SERVE_BROKERS, *FOREIGN)  # the Java clients run with Kafka's own jars
    plan = faults.schedule(seed, seconds, kinds, workload.SHAPE["producers"] + (
        workload.SHAPE["java_producers"] if kafka else 0), workload.SHAPE["ctp"] + (
        workload.SHAPE["java_ctp"] if kafka else 0))
    out.mkdir(parents=True, exist_ok=True)
    faults.save(plan, out / "faults.json", seed)
    say(f"schedule (seed {seed}): " + ("; ".join(f.describe() for f in plan) or "no faults"))
    started = time.monotonic()
    if broker in SERVE_BROKERS:
        nodes = 1
        opened = serve_cluster(out, transaction_version, SERVE_BROKERS[broker])
    elif broker in FOREIGN:
        nodes = 1
        opened = foreign_cluster(out, broker)
    else:
        opened = kafka_cluster(out, version, transaction_version, nodes, proxied="network" in kinds)
    with opened as cluster:
        say(f"{cluster.name} {cluster.runtime.version}: {nodes} node(s) ready in {cluster.start_seconds:.1f} s, "
            f"transaction.version {transaction_version}")
        events, facts = workload.run(cluster, out, plan, seed, seconds, say)
        kafka_version = cluster.runtime.version if broker not in (*SERVE_BROKERS, *FOREIGN) else broker
    history.save(events, out / "history.jsonl")
    summary: dict[str, Any] = {"kafka": kafka_version, "nodes": nodes, "transaction_version": transaction_version,
                               "seconds": seconds, "seed": seed, "faults_planned": [f.describe() for f in plan],
                               "facts": facts, "settings": SETTINGS, "events": len(events),
                               "run_seconds": round(time.monotonic() - started, 1)}
    summary.update(judge(events, transaction_version))
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def render(summary: dict[str, Any]) -> str:
    v = summary["validation"]
    head = (f"chaos: {summary['kafka']}, {summary['nodes']} nodes, transaction.version "
            f"{summary['transaction_version']}, {summary['seconds']} s, seed {summary['seed']}" if "kafka" in summary
            else f"chaos: the history {summary.get('history')}, transaction.version {summary['transaction_version']}")
    counts = ", ".join(f"{kind} {n}" for kind, n in sorted(summary["anomaly_counts"].items()))
    lines = [head,
             f"faults injected ({len(summary['faults_injected'])}): " + "; ".join(summary["faults_injected"]),
             f"transactions: {summary['transactions']}",
             f"anomalies: {len(summary['anomalies'])} over "
             f"{sum(summary['checked'].values()):,} checks ({summary['seconds_anomalies']} s)"
             + (f": {counts}" if counts else "")]
    for a in summary["anomalies"][:10]:
        lines.append(f"  {a['kind']}: {a['detail']}")
        for event in a["witness"][:4]:
            lines.append(f"      #{event['index']} t={event['time']} {event['process']} {event['type']} {event['f']}"
                         + (f" {event['error']}" if event.get("error") else ""))
    if v["explained"]:
        lines.append(f"validation: explained by the spec's partition model ({v['records']} records, {v['markers']} "
                     f"markers over {v['partitions']} partitions, {v['nodes']} search nodes, {v['seconds']} s)")
    else:
        at = v["where"] + (f" (event {v['event']})" if v.get("event") is not None else "")
        lines.append(f"validation: {'unexplained' if v['complete'] else 'inconclusive'} at {at}: {v['why']}")
        lines += [f"  closest: {step}" for step in v["closest"][-5:]]
    for key, what in (("coordinator", "the transaction coordinator"), ("groups", "the group coordinator")):
        c = summary.get(key)
        if c is None:
            continue
        if c["explained"]:
            lines.append(f"{key}: explained by {what} of the spec ({c['calls']} calls of {c['ids']} "
                         f"{'transactional ids' if key == 'coordinator' else 'groups'}, {c['nodes']} search nodes)")
        else:
            lines.append(f"{key}: {'unexplained' if c['complete'] else 'inconclusive'} at {c['where']}: {c['why']}")
            lines += [f"  closest: {step}" for step in c["closest"][-5:]]
    return "\n".join(lines)


def html_page(summary: dict[str, Any], events: list[history.Event]) -> str:
    """A self-contained page: the verdicts, and a timeline (SVG) with a row per process, the faults as bands,
    the calls as ticks coloured by outcome, the witnesses' events circled."""
    processes = sorted({e.process for e in events}, key=lambda p: (not history.is_nemesis(p), p))
    row = {p: i for i, p in enumerate(processes)}
    end = max((e.time for e in events), default=1.0) or 1.0
    width, left, height = 1100, 160, 18
    scale = (width - left - 10) / end
    marked = {w["index"] for a in summary["anomalies"] for w in a["witness"]}
    marked |= {summary[k]["event"] for k in VALIDATIONS if summary.get(k, {}).get("event") is not None}
    colours = {"ok": "#2a7", "fail": "#c33", "info": "#e90"}
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height * len(processes) + 30}">']
    for p, i in row.items():
        parts.append(f'<text x="4" y="{i * height + 13}" font-size="11">{html.escape(p)}</text>')
    for op in history.pair(events):
        y = row[op.process] * height
        x0, x1 = left + op.invoke.time * scale, left + op.done.time * scale
        if history.is_nemesis(op.process):
            parts.append(f'<rect x="{x0:.1f}" y="0" width="{max(x1 - x0, 2):.1f}" height="{height * len(processes)}" '
                         f'fill="#f55" opacity="0.12"><title>{html.escape(str(op.invoke.value.get("fault")))}</title>'
                         '</rect>')
            continue
        colour = colours.get(op.outcome, "#999")
        parts.append(f'<line x1="{x0:.1f}" x2="{max(x1, x0 + 1):.1f}" y1="{y + 9}" y2="{y + 9}" stroke="{colour}" '
                     f'stroke-width="6"><title>{html.escape(op.f)} {op.outcome} '
                     f'{html.escape(op.done.error or "")}</title></line>')
        if op.invoke.index in marked or op.done.index in marked:
            parts.append(f'<circle cx="{x0:.1f}" cy="{y + 9}" r="7" fill="none" stroke="#000" stroke-width="2"/>')
    parts.append(f'<text x="{left}" y="{height * len(processes) + 20}" font-size="11">0 s</text>'
                 f'<text x="{width - 50}" y="{height * len(processes) + 20}" font-size="11">{end:.0f} s</text></svg>')
    anomaly_rows = "".join(f"<tr><td>{html.escape(a['kind'])}</td><td>{html.escape(a['detail'])}</td><td>"
                           + ", ".join(f"#{w['index']}" for w in a["witness"]) + "</td></tr>"
                           for a in summary["anomalies"])
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>txnspec chaos</title>"
            f"<style>body{{font-family:sans-serif;margin:1em}} td{{padding:2px 8px;border-bottom:1px solid #ddd}}"
            f"</style></head><body><h1>txnspec chaos</h1><pre>{html.escape(render(summary))}</pre>"
            f"<h2>Timeline</h2><p>Red bands: faults. Bars: calls (green ok, red fail, orange unknown). Circles: "
            f"events of an anomaly's witness, and the event a validation could not explain.</p>{''.join(parts)}"
            f"<h2>Anomalies</h2><table><tr><th>kind</th><th>detail</th><th>witness events</th></tr>{anomaly_rows}"
            f"</table></body></html>")
