"""Every seeded Kafka bug found by simulation on ``full``, the scenario bugs live in (issue 34), with seed 0 (the
default of ``txnspec check --simulate``).

All seven variants are found on ``full`` itself (at the variant's transaction version). ``full`` has what each needs:
a zombie instance (``zombie-not-fenced``), two transactions per instance (``kafka-17754``: a late EndTxn of the first
must meet the second at the same producer id and epoch), consumer-group members and a rebalance
(``zombie-offsets-not-fenced``: without members every TxnOffsetCommit carries generation -1 and no member, which the
current protocol accepts too), a timeout, a duplicate and a failover. Shrunk lengths are compared with the shortest
counterexample breadth first finds on the variant's small scenario (tests/spec/test_variants.py). The walks of a
seed are the same for any number of workers, so the pins hold for ``--workers 2`` too. Long runs and times:
bench/simulate_bench.py.
"""

from __future__ import annotations

import pytest

from txnspec.checker.simulate import simulate
from txnspec.spec.model import build_model
from txnspec.spec.scenarios import SCENARIOS

FULL = SCENARIOS["full"]

# variant -> (property, (walks, length found, shrunk length), shortest on the small scenario), seed 0
ON_FULL: dict[str, tuple[str, tuple[int, int, int], int]] = {
    "zombie-not-fenced": ("fenced_producer_never_commits", (345, 62, 21), 19),
    "kafka-17754": ("end_txn_applies_to_its_transaction", (741, 44, 19), 19),
    "hanging-transaction": ("no_hanging_transaction", (1, 26, 11), 11),
    "late-produce-joins-next": ("read_committed_only_committed", (391, 49, 23), 23),
    "no-duplicate-detection": ("no_duplicate_append", (5, 20, 8), 8),
    "failover-without-markers": ("prepared_transactions_complete", (145, 41, 17), 13),
    "zombie-offsets-not-fenced": ("no_fenced_member_offsets_commit", (8, 49, 14), 11),
}

# over 100 walks each: several CPU seconds (failover-without-markers' shrinking as a fair loop is in the default tier
# on a toy, tests/checker/test_simulate.py)
SLOWER = {"zombie-not-fenced", "kafka-17754", "late-produce-joins-next", "failover-without-markers"}


@pytest.mark.parametrize("variant", [pytest.param(v, marks=pytest.mark.slow) if v in SLOWER else v
                                     for v in sorted(ON_FULL)])
def test_every_kafka_bug_is_found_on_full_by_simulation(variant: str) -> None:
    prop, pinned, shortest = ON_FULL[variant]
    model = build_model(FULL, variant)
    result = simulate(model, seed=0, properties=[prop], max_walks=1_000, seconds=600, shrink_seconds=600)
    verdict = result.verdict(prop)
    assert verdict.holds is False and verdict.counterexample is not None, result.render()
    stats = result.simulation
    assert (stats.walks, stats.found_length, stats.shrunk_length) == pinned
    assert stats.shrunk_length <= 1.5 * shortest
    cex = verdict.counterexample
    for (_, state), (action, successor) in zip(cex.steps, cex.steps[1:], strict=False):  # a behaviour of the spec
        assert (action, successor) in list(model.next_steps(state))
    if variant == "failover-without-markers":
        # the walk ended where every instance had finished (41 steps, 32 once shrunk as such); the shrinker found
        # a shorter weakly fair loop on its way: an EndTxn answered CONCURRENT_TRANSACTIONS forever while the
        # transaction the failed-over coordinator never completes stays prepared
        assert cex.loop_start is not None and cex.steps[-1][1] == cex.steps[cex.loop_start][1]
        assert "EndTxnResponse(CONCURRENT_TRANSACTIONS" in cex.actions[-1]


def test_full_has_what_every_bug_needs() -> None:
    assert FULL.has_zombies and FULL.transactions_per_producer == 2
    assert FULL.group_members and FULL.budget("rebalance") == 1
    assert {"no_fenced_member_offsets_commit", "end_txn_applies_to_its_transaction"} <= \
        {p.name for p in build_model(FULL).properties}
    # without group members the variant that skips the member check walks exactly as the current protocol (why
    # full has members)
    memberless = FULL.with_(name="full-without-members", group_members=False,
                            faults={f: n for f, n in FULL.faults.items() if f != "rebalance"})
    current = simulate(build_model(memberless), seed=3, max_walks=40, properties=["atomic_outcome"])
    variant = simulate(build_model(memberless, "zombie-offsets-not-fenced"), seed=3, max_walks=40,
                       properties=["atomic_outcome"])
    assert (current.simulation.steps, current.states, current.coverage) == \
        (variant.simulation.steps, variant.states, variant.coverage)
