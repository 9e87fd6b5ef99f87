"""Every seeded Kafka bug found by simulation on ``full``, the scenario bugs live in (issue 34), with a fixed seed.

Five variants are found on ``full`` itself (at the variant's transaction version). Two need what ``full`` does not
have: ``kafka-17754`` a second transaction of one producer instance (a late request of the first must meet the
second at the same producer id and epoch; each instance of ``full`` runs one transaction, and a second instance of
the id starts with a bumped epoch), ``zombie-offsets-not-fenced`` consumer-group members (without them every
TxnOffsetCommit carries generation -1 and no member, which the current protocol accepts too: on ``full`` the
variant is the current protocol). Those two are found on ``full`` with that one ingredient added. Shrunk lengths
are compared with the shortest counterexample breadth first finds on the variant's small scenario
(tests/spec/test_variants.py). Long runs: bench/simulate_bench.py.
"""

from __future__ import annotations

import pytest

from txnspec.checker.simulate import simulate
from txnspec.spec.model import build_model
from txnspec.spec.scenarios import SCENARIOS, Scenario

FULL = SCENARIOS["full"]
WITH_TWO_TRANSACTIONS = FULL.with_(name="full+2-transactions", transactions_per_producer=2)
WITH_MEMBERS = FULL.with_(name="full+members", group_members=True, faults={**FULL.faults, "rebalance": 1})

# variant -> (scenario, property, seed, (walks, length found, shrunk length), shortest on the small scenario)
ON_FULL: dict[str, tuple[Scenario, str, int, tuple[int, int, int], int]] = {
    "zombie-not-fenced": (FULL, "fenced_producer_never_commits", 6, (66, 48, 23), 19),
    "hanging-transaction": (FULL, "no_hanging_transaction", 0, (6, 28, 11), 11),
    "late-produce-joins-next": (FULL, "read_committed_only_committed", 0, (58, 61, 23), 23),
    "no-duplicate-detection": (FULL, "no_duplicate_append", 0, (41, 31, 8), 8),
    "failover-without-markers": (FULL, "prepared_transactions_complete", 0, (13, 53, 16), 13),
    "kafka-17754": (WITH_TWO_TRANSACTIONS, "end_txn_applies_to_its_transaction", 1, (48, 50, 19), 19),
    "zombie-offsets-not-fenced": (WITH_MEMBERS, "no_fenced_member_offsets_commit", 0, (82, 42, 14), 11),
}


SLOWER = {"zombie-not-fenced", "late-produce-joins-next", "kafka-17754"}  # over 15 s each on a loaded machine


@pytest.mark.parametrize("variant", [pytest.param(v, marks=pytest.mark.slow) if v in SLOWER else v
                                     for v in sorted(ON_FULL)])
def test_every_kafka_bug_is_found_on_full_by_simulation(variant: str) -> None:
    scenario, prop, seed, pinned, shortest = ON_FULL[variant]
    model = build_model(scenario, variant)
    result = simulate(model, seed=seed, properties=[prop], max_walks=1_000, seconds=600, shrink_seconds=600)
    verdict = result.verdict(prop)
    assert verdict.holds is False and verdict.counterexample is not None, result.render()
    stats = result.simulation
    assert (stats.walks, stats.found_length, stats.shrunk_length) == pinned
    assert stats.shrunk_length <= 1.5 * shortest
    cex = verdict.counterexample
    for (_, state), (action, successor) in zip(cex.steps, cex.steps[1:], strict=False):  # a behaviour of the spec
        assert (action, successor) in list(model.next_steps(state))
    if variant == "failover-without-markers":  # on full a zombie's InitProducerId retried forever: a fair loop
        assert cex.loop_start is not None and cex.steps[-1][1] == cex.steps[cex.loop_start][1]
        assert "InitProducerIdResponse(CONCURRENT_TRANSACTIONS" in cex.actions[-1]


def test_full_lacks_what_two_bugs_need() -> None:
    assert FULL.transactions_per_producer == 1 and not FULL.group_members and not FULL.budget("rebalance")
    # without group members the variant that skips the member check walks exactly as the current protocol
    current = simulate(build_model(FULL), seed=3, max_walks=40, properties=["atomic_outcome"])
    variant = simulate(build_model(FULL, "zombie-offsets-not-fenced"), seed=3, max_walks=40,
                       properties=["atomic_outcome"])
    assert (current.simulation.steps, current.states, current.coverage) == \
        (variant.simulation.steps, variant.states, variant.coverage)
