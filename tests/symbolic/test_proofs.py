"""The Kafka proofs hold, need their strengthening, and BMC finds the known-bad variants' bugs."""

from __future__ import annotations

import json

import pytest

from txnspec.checker.symbolic import bmc, check_inductive
from txnspec.cli import main
from txnspec.spec import symbolic, symbolic_explicit, symbolic_properties, symbolic_vars
from txnspec.spec.txn_state import TxnState
from txnspec.spec.variants import variant_named

MODEL = symbolic.build()
PROOFS = symbolic_properties.proofs()


@pytest.mark.parametrize("name", list(PROOFS))
def test_property_is_proved_inductively(name: str) -> None:
    prop, helpers = PROOFS[name]
    result = check_inductive(MODEL, [prop], helpers)
    assert result.status == "proved", [f.describe() for f in result.failures]
    assert result.seconds < 60


@pytest.mark.parametrize("name", [n for n, p in symbolic_properties.PROOFS.items() if p.helpers])
def test_the_strengthening_is_needed(name: str) -> None:
    prop, _ = PROOFS[name]
    result = check_inductive(MODEL, [prop])
    assert result.status == "violated"
    assert all(f.transition in {t.name for t in MODEL.transitions} for f in result.failures)


def test_every_property_holds_to_depth_6_without_lemmas() -> None:
    result = bmc(symbolic.build(1), list(symbolic_properties.invariants(1).values()), 6, logic="QF_LIA")
    assert result.ok


def test_bmc_finds_the_zombie_commit_and_it_replays_in_the_explicit_variant() -> None:
    result = bmc(symbolic.build(buggy="zombie-not-fenced"),
                 [symbolic_properties.invariants()["fenced_producer_never_commits"]], 8, logic="QF_LIA")
    assert result.status == "violated" and result.depth == 4
    assert [a for a, _ in result.path][-1] == "EndTxn"
    last = result.params[-1]
    assert last["commit"] and last["epoch"] < result.path[-2][1]["producer_epoch"]
    protocol = variant_named("zombie-not-fenced").protocol
    cs, _ = symbolic_explicit.replay_explicit(result.path, result.params, protocol)[-1]
    md = cs.metadata(symbolic_vars.TID)
    assert md is not None and md.state is TxnState.PREPARE_COMMIT
    with pytest.raises(AssertionError):  # the current protocol fences the zombie
        symbolic_explicit.replay_explicit(result.path, result.params)


def test_bmc_finds_the_duplicate_append_and_it_replays_in_the_explicit_variant() -> None:
    result = bmc(symbolic.build(buggy="no-duplicate-detection"),
                 [symbolic_properties.invariants()["no_duplicate_append"]], 8, logic="QF_LIA")
    assert result.status == "violated" and result.depth == 3
    assert [a for a, _ in result.path][-2:] == ["Produce", "Produce"]
    protocol = variant_named("no-duplicate-detection").protocol
    _, parts = symbolic_explicit.replay_explicit(result.path, result.params, protocol)[-1]
    name = symbolic_vars.PARTITIONS[result.params[-1]["partition"]]
    assert parts[name].log_end_offset == result.path[-1][1][f"log_end_offset[{name}]"]


def test_buggy_encodings_fail_their_proofs() -> None:
    zombie = symbolic.build(buggy="zombie-not-fenced")
    prop, helpers = PROOFS["fenced_producer_never_commits"]
    failures = check_inductive(zombie, [prop], helpers).failures
    assert [(f.transition, f.status) for f in failures] == [("EndTxn", "violated")]


def test_cli_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prove", "--property", "no_duplicate_append", "--property", "prepare_never_reversed"]) == 0
    assert "proved" in capsys.readouterr().out
    assert main(["prove", "--property", "no_such_property"]) == 2
    assert "unknown property 'no_such_property'" in capsys.readouterr().err
    assert main(["prove", "--bmc-depth", "-1"]) == 2
    assert main(["prove", "--buggy", "zombie-not-fenced", "--property", "fenced_producer_never_commits",
                 "--bmc-depth", "5"]) == 1
    out = capsys.readouterr().out
    assert "not preserved by transition EndTxn" in out and "violated at depth 4" in out
    assert main(["prove", "--property", "sequences_contiguous", "--bmc-depth", "3", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["proofs"][0]["status"] == "proved" and report["bmc"]["status"] == "ok"


def test_cli_unknown_is_exit_3(capsys: pytest.CaptureFixture[str]) -> None:
    # a timeout too short for z3 to finish the unrolling
    code = main(["prove", "--property", "fenced_producer_never_commits", "--bmc-depth", "40", "--timeout", "0.001"])
    out = capsys.readouterr().out
    assert code == 3, out
    assert "z3 answered unknown" in out and "(timeout)" in out
