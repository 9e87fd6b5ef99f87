"""The conformance run on Spark: traces generated and replayed in the executors, results as Parquet.

Plan
    The driver builds a list of small *tasks* ``(index, strategy, seed)``: covering traces are the
    paths of :func:`~txnspec.conformance.generate.covering_plan` (computed once in the driver from the
    checker's state graph and broadcast as action texts), random traces are seeded walks whose seed is
    derived from the run's seed and the trace index. ``mapPartitions`` runs :func:`run_partition` on
    each slice: it generates each trace on the spec, replays it on the adapter under test, shrinks a
    divergence, and yields one result row. Everything the executors run is a pure function of the task
    and the broadcast configuration, so a retried task writes the same rows, and the output directory
    is overwritten. The driver never collects traces: the summary is computed with aggregations.

Output (``--out DIR``)
    ``DIR/results`` (Parquet): ``trace_id, strategy, seed, length, verdict (pass | diverge | error),
    divergence_step, detail, kinds, transitions, errors, shrunk_length, shrunk_trace`` (the minimal
    diverging trace as one ``txnspec-trace/2`` line); ``DIR/summary.json``: counts and coverage.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from txnspec.conformance.adapters import make_adapter
from txnspec.conformance.generate import coverage, covering_plan, random_walk, realize
from txnspec.conformance.replay import replay, shrink
from txnspec.conformance.traces import TraceError
from txnspec.spec.actions import Action

LOG4J2 = """status = error
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
logger.repl.name = org.apache.spark.repl.Main
logger.repl.level = error
"""

RESULT_COLUMNS = ("trace_id", "strategy", "seed", "length", "verdict", "divergence_step", "detail", "kinds",
                  "transitions", "errors", "shrunk_length", "shrunk_trace")


@dataclass(frozen=True)
class JobConfig:
    scenario: str
    traces: int
    strategy: str = "both"  # covering | random | both
    variant: str = "current"
    seed: int = 0
    max_steps: int = 200
    adapter: str = "spec"
    shrink: bool = True
    variant_file: str | None = None  # a user-written variant (--variant-file), loaded by each worker too
    covering_paths: tuple[tuple[Action, ...], ...] = field(default=(), repr=False)
    # a test hook: the first attempt of these Spark partitions fails after its first row (Spark retries them;
    # in local mode only with a master local[N,F], F attempts)
    fail_first_attempt_of: tuple[int, ...] = ()


class InjectedTaskFailure(RuntimeError):
    """The deliberate failure of a first task attempt (:attr:`JobConfig.fail_first_attempt_of`)."""


def trace_seed(base: int, index: int) -> int:
    """The seed of random trace ``index`` of a run seeded ``base`` (a pure function)."""
    return (base * 1_000_003 + index) & 0x7FFF_FFFF_FFFF


def plan_tasks(config: JobConfig) -> list[tuple[int, str, int]]:
    """``(index, strategy, seed)`` per trace: the covering paths first (up to ``traces``), then random walks.

    ``covering``: only the covering set (truncated to ``traces``); ``random``: ``traces`` walks;
    ``both``: the covering set, then random walks up to ``traces`` in all."""
    tasks: list[tuple[int, str, int]] = []
    if config.strategy in ("covering", "both"):
        tasks += [(i, "covering", i) for i in range(min(len(config.covering_paths), config.traces))]
    if config.strategy in ("random", "both"):
        tasks += [(i, "random", trace_seed(config.seed, i)) for i in range(config.traces - len(tasks))]
    return tasks


def run_task(config: JobConfig, index: int, strategy: str, seed: int) -> dict[str, Any]:
    """Generate one trace on the spec, replay it on the adapter, shrink a divergence: one result row."""
    trace_id = f"{config.scenario}/{strategy}/{seed}"
    row: dict[str, Any] = {"trace_id": trace_id, "strategy": strategy, "seed": seed, "length": 0,
                           "verdict": "error", "divergence_step": None, "detail": "", "kinds": [],
                           "transitions": [], "errors": [], "shrunk_length": None, "shrunk_trace": None}
    try:
        if strategy == "covering":
            trace = realize(config.scenario, config.variant, config.covering_paths[index], trace_id=trace_id,
                            seed=seed, strategy="covering")
        else:
            trace = random_walk(config.scenario, seed, variant=config.variant, max_steps=config.max_steps,
                                trace_id=trace_id)
        cov = coverage(trace)
        row.update(length=len(trace), kinds=cov["kinds"], transitions=cov["transitions"], errors=cov["errors"])
        verdict = replay(trace, make_adapter(config.adapter))
        row.update(verdict="pass" if verdict.ok else "diverge", divergence_step=verdict.divergence_step,
                   detail=verdict.detail)
        if not verdict.ok and config.shrink:
            small, _ = shrink(trace, lambda: make_adapter(config.adapter), max_replays=500)
            row.update(shrunk_length=len(small), shrunk_trace=small.to_line())
    except (TraceError, ValueError, KeyError, RuntimeError) as exc:
        row["detail"] = f"trace {trace_id!r}: {type(exc).__name__}: {exc}"
    return row


def run_partition(config: JobConfig, tasks: Iterable[tuple[int, str, int]], done: Any = None
                  ) -> Iterator[tuple[Any, ...]]:
    """Run the tasks of one Spark partition; ``done``: an accumulator counting the traces finished."""
    if config.variant_file is not None:
        from txnspec.spec.variants.user import load_variant_file

        load_variant_file(config.variant_file)
    doomed = False
    if config.fail_first_attempt_of:
        from pyspark import TaskContext

        context = TaskContext.get()
        doomed = context is not None and context.attemptNumber() == 0 \
            and context.partitionId() in config.fail_first_attempt_of
    for index, strategy, seed in tasks:
        row = run_task(config, index, strategy, seed)
        yield tuple(row[c] for c in RESULT_COLUMNS)
        if done is not None:
            done.add(1)
        if doomed:  # after a row went out: the attempt dies half done
            raise InjectedTaskFailure(f"the first attempt of this partition fails after trace {index} (test hook)")


def _partition_runner(config: JobConfig, done: Any = None) -> Any:
    def run(tasks: Iterable[tuple[int, str, int]]) -> Iterator[tuple[Any, ...]]:
        return run_partition(config, tasks, done)
    return run


def _schema() -> Any:
    from pyspark.sql import types as T

    strings = T.ArrayType(T.StringType(), containsNull=False)
    return T.StructType([
        T.StructField("trace_id", T.StringType(), False), T.StructField("strategy", T.StringType(), False),
        T.StructField("seed", T.LongType(), False), T.StructField("length", T.IntegerType(), False),
        T.StructField("verdict", T.StringType(), False), T.StructField("divergence_step", T.IntegerType(), True),
        T.StructField("detail", T.StringType(), False), T.StructField("kinds", strings, False),
        T.StructField("transitions", strings, False), T.StructField("errors", strings, False),
        T.StructField("shrunk_length", T.IntegerType(), True), T.StructField("shrunk_trace", T.StringType(), True),
    ])


def spark_session(master: str = "local[*]", app_name: str = "txnspec-conform") -> Any:
    """A quiet Spark session bound to loopback (UI off, log4j2 at error)."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # log4j2 reads log4j2.properties from the classpath, where Spark puts SPARK_CONF_DIR
    conf_dir = Path(tempfile.gettempdir()) / "txnspec-spark-conf"
    conf_dir.mkdir(exist_ok=True)
    log_config = conf_dir / "log4j2.properties"
    if not log_config.exists() or log_config.read_text(encoding="utf-8") != LOG4J2:
        log_config.write_text(LOG4J2, encoding="utf-8")
    os.environ.setdefault("SPARK_CONF_DIR", str(conf_dir))
    java_opts = f"-Dlog4j2.configurationFile=file:{log_config}"
    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.extraJavaOptions", java_opts)
               .config("spark.executor.extraJavaOptions", java_opts)
               .config("spark.sql.shuffle.partitions", "8")
               .config("spark.task.maxFailures", "4"))
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


@contextmanager
def _reporting(progress: Callable[[int, int], None] | None, done: Callable[[], int], total: int) -> Iterator[None]:
    """Call ``progress(done(), total)`` about once a second from a thread while the body runs."""
    if progress is None:
        yield
        return
    stop = threading.Event()

    def report() -> None:
        while not stop.wait(1.0):
            progress(done(), total)

    thread = threading.Thread(target=report, name="txnspec-conform-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)


@dataclass
class JobResult:
    summary: dict[str, Any]
    out: Path


def run_job(config: JobConfig, *, master: str = "local[*]", out: Path = Path("out/conform"),
            session: Any = None, max_states: int | None = None,
            progress: Callable[[int, int], None] | None = None) -> JobResult:
    """Plan, run on Spark, write ``out/results`` (Parquet) and ``out/summary.json``; return the summary.

    ``progress`` is called about once a second with ``(traces done, traces)`` while the traces run (the
    count grows as Spark tasks finish)."""
    from pyspark.sql import functions as F

    started = time.monotonic()
    plan = None
    if config.strategy in ("covering", "both"):
        plan = covering_plan(config.scenario, config.variant, max_states)
        config = JobConfig(**{**config.__dict__, "covering_paths": plan.paths})
    planned = time.monotonic()
    tasks = plan_tasks(config)
    if session is None:
        from pyspark.sql import SparkSession

        session = SparkSession.getActiveSession()  # e.g. under spark-submit, or a notebook's session
    own_session = session is None
    spark = spark_session(master) if own_session else session
    session_ready = time.monotonic()
    try:
        sc = spark.sparkContext
        slices = max(1, min(len(tasks), sc.defaultParallelism * 4))
        done = sc.accumulator(0)
        rdd = sc.parallelize(tasks, slices).mapPartitions(_partition_runner(config, done))
        df = spark.createDataFrame(rdd, _schema())
        results = out / "results"
        with _reporting(progress, lambda: int(done.value), len(tasks)):
            df.write.mode("overwrite").parquet(str(results))
        written = spark.read.parquet(str(results))
        # three small jobs: counts per (verdict, strategy), the union of the coverage, the first divergences
        groups = written.groupBy("verdict", "strategy").agg(F.count("*").alias("n"), F.sum("length").alias("steps"))
        counts: dict[str, int] = {}
        by_strategy: dict[str, int] = {}
        steps = 0
        for r in groups.collect():
            counts[r["verdict"]] = counts.get(r["verdict"], 0) + int(r["n"])
            by_strategy[r["strategy"]] = by_strategy.get(r["strategy"], 0) + int(r["n"])
            steps += int(r["steps"] or 0)
        # each covered item as a (column, value) struct: one distinct over the three columns, read back by field
        def item_of(column: str) -> Any:  # one argument: a two-argument function gets the index as its second
            return lambda x: F.struct(F.lit(column).alias("column"), x.alias("value"))

        tagged = F.concat(*(F.transform(c, item_of(c)) for c in ("kinds", "transitions", "errors")))
        covered = written.select(F.explode(tagged).alias("item")).select("item.column", "item.value").distinct()
        union: dict[str, list[str]] = {"kinds": [], "transitions": [], "errors": []}
        for r in covered.collect():
            union[r["column"]].append(str(r["value"]))
        kinds, transitions, errors = (sorted(union[c]) for c in ("kinds", "transitions", "errors"))
        first = (written.where(F.col("verdict") != "pass").orderBy("trace_id")
                 .select("trace_id", "divergence_step", "detail", "shrunk_length", "shrunk_trace").limit(5).collect())
    finally:
        if own_session:
            spark.stop()
    finished = time.monotonic()
    summary: dict[str, Any] = {
        "scenario": config.scenario, "variant": config.variant, "adapter": config.adapter, "seed": config.seed,
        "master": master, "strategy": config.strategy, "traces": sum(counts.values()),
        "steps": steps, "by_strategy": by_strategy,
        "passed": counts.get("pass", 0), "diverged": counts.get("diverge", 0), "errors": counts.get("error", 0),
        "coverage": {"kinds": kinds, "transitions": transitions, "error_codes": errors},
        "first_divergences": [{"trace_id": r["trace_id"], "step": r["divergence_step"], "detail": r["detail"],
                               "shrunk_length": r["shrunk_length"], "shrunk_trace": r["shrunk_trace"]}
                              for r in first],
        "seconds": {"plan": round(planned - started, 3), "session": round(session_ready - planned, 3),
                    "run": round(finished - session_ready, 3), "total": round(finished - started, 3)},
        "results": str(out / "results"),
    }
    if plan is not None:
        summary["graph"] = {"states": plan.states, "complete": plan.complete, "kinds": sorted(plan.kinds),
                            "transitions": sorted(plan.transitions), "covering_traces": len(plan.paths),
                            "missed_kinds": sorted(plan.kinds - set(kinds)),
                            "missed_transitions": sorted(plan.transitions - set(transitions))}
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return JobResult(summary, out)


def render(summary: dict[str, Any]) -> str:
    strategies = ", ".join(f"{k} {v}" for k, v in sorted(summary["by_strategy"].items()))
    lines = [f"conformance of {summary['scenario']} (variant {summary['variant']}) against {summary['adapter']} "
             f"on {summary['master']}, seed {summary['seed']}",
             f"  traces: {summary['traces']} ({strategies}), steps: {summary['steps']}",
             f"  passed {summary['passed']}, diverged {summary['diverged']}, errors {summary['errors']}"]
    cov = summary["coverage"]
    graph = summary.get("graph")
    if graph:
        lines.append(f"  coverage: {len(cov['kinds'])}/{len(graph['kinds'])} action kinds, "
                     f"{len(set(cov['transitions']) & set(graph['transitions']))}/{len(graph['transitions'])} "
                     f"coordinator transitions of the explored graph ({graph['states']} states)")
        if graph["missed_kinds"] or graph["missed_transitions"]:
            lines.append(f"  missed: {', '.join(graph['missed_kinds'] + graph['missed_transitions'])}")
    else:
        lines.append(f"  coverage: {len(cov['kinds'])} action kinds, {len(cov['transitions'])} coordinator "
                     f"transitions")
    lines.append(f"  error codes seen: {', '.join(cov['error_codes']) or 'none'}")
    for d in summary["first_divergences"]:
        lines.append(f"  DIVERGENCE {d['trace_id']} at step {d['step']} (shrunk to {d['shrunk_length']} steps): "
                     f"{d['detail'][:300]}")
    s = summary["seconds"]
    lines.append(f"  time: plan {s['plan']:.1f} s, Spark session {s['session']:.1f} s, run {s['run']:.1f} s")
    lines.append(f"  results: {summary['results']}")
    return "\n".join(lines)
