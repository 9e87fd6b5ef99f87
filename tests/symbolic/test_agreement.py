"""The z3 encoding and the explicit handlers agree: same state, same request, same successor.

A consistent coordinator + partition-leader state is sampled (hypothesis), turned into explicit states
with ``spec.symbolic_explicit.to_explicit``; each action runs on both sides: the explicit handler
(``spec/coordinator.py``, ``spec/partition.py``) and the z3 transition, whose successor z3 computes
from the concrete values. The encoded fields of both successors must be equal.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from txnspec.spec import coordinator as coord
from txnspec.spec import coordinator_state as coord_state
from txnspec.spec import partition as part
from txnspec.spec import symbolic, symbolic_explicit, symbolic_vars, txn_expiry, txn_loading, txn_markers
from txnspec.spec.errors import Errors
from txnspec.spec.messages import AddPartitionsToTxn, EndTxn, InitProducerId, TransactionResult
from txnspec.spec.txn_state import TxnState

N = 2
MODEL = symbolic.build(N)
P = symbolic_vars.PARTITIONS
COORDINATOR_STATES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort")


def pv(name: str, i: int) -> str:
    return f"{name}[{P[i]}]"


@st.composite
def states(draw: st.DrawFn, only: tuple[str, ...] = ()) -> dict[str, Any]:
    exists = bool(only) or draw(st.sampled_from([True, True, True, False]))
    v: dict[str, Any] = {"exists": exists, "coordinator_epoch": draw(st.integers(0, 3))}
    if exists:
        state = draw(st.sampled_from(only or ("Ongoing", *COORDINATOR_STATES)))
        pid = draw(st.integers(0, 3))
        epoch = draw(st.integers(0, 6))
        active = state in ("Ongoing", "PrepareCommit", "PrepareAbort")
        parts = draw(st.lists(st.booleans(), min_size=N, max_size=N).filter(lambda x: any(x))) if active \
            else [False] * N
        logged = [p or (state.startswith("Prepare") and draw(st.booleans())) for p in parts]
        v.update(state=state, producer_id=pid, next_producer_id=pid + 1 + draw(st.integers(0, 2)),
                 producer_epoch=epoch, last_producer_epoch=draw(st.sampled_from([-1, *range(epoch + 1)])),
                 tv2=draw(st.booleans()))
        for i in range(N):
            v[pv("part", i)], v[pv("logged_part", i)] = parts[i], logged[i]
    else:
        v.update(state="Empty", producer_id=-1, next_producer_id=draw(st.integers(0, 3)), producer_epoch=-1,
                 last_producer_epoch=-1, tv2=False)
        for i in range(N):
            v[pv("part", i)] = v[pv("logged_part", i)] = False
    for i in range(N):
        leo = draw(st.integers(0, 20))
        entry_epoch = draw(st.integers(-1, v["producer_epoch"] + 1)) if exists else -1
        has_batch = entry_epoch != -1 and draw(st.booleans())
        first = draw(st.integers(0, 10)) if has_batch else -1
        last = first + draw(st.integers(0, 3)) if has_batch else -1
        open_txn = entry_epoch != -1 and leo > 0 and draw(st.booleans())
        v.update({pv("entry_epoch", i): entry_epoch,
                  pv("entry_coordinator_epoch", i): draw(st.integers(-1, 4)) if entry_epoch != -1 else -1,
                  pv("last_first_seq", i): first, pv("last_seq", i): last,
                  pv("txn_first_offset", i): draw(st.integers(0, leo - 1)) if open_txn else -1,
                  pv("log_end_offset", i): leo})
    return v


def symbolic_successor(name: str, values: dict[str, Any], params: dict[str, Any]) -> dict[str, Any] | None:
    encoded = {k: v for k, v in values.items() if k in symbolic_explicit.ENCODED_FIELDS}
    encoded["state"] = symbolic_vars.STATE[TxnState(values["state"])]
    return MODEL.successor(MODEL.transition(name), encoded, params)


def assert_agree(explicit: dict[str, Any], sym: dict[str, Any] | None, context: Any) -> None:
    assert sym is not None, f"the z3 transition is disabled: {context}"
    diff = {k: (v, sym[k]) for k, v in explicit.items() if sym[k] != v}
    assert not diff, f"explicit vs z3 differ on {diff}: {context}"


def _verified(cs: coord_state.CoordinatorState, ps: part.PartitionState, name: str, pid: int, epoch: int,
              transactional: bool) -> bool:
    """``system._verify_transactional_produce`` (TV1 leader verification, verification enabled)."""
    if not transactional or part.has_ongoing_transaction(ps, pid, epoch):
        return True
    md = cs.metadata(symbolic_vars.TID)
    return (md is not None and md.producer_id == pid and md.producer_epoch == epoch
            and md.state not in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT) and name in md.partitions)


def check_action(values: dict[str, Any], data: st.DataObject, action: str | None = None) -> None:
    cs, parts = symbolic_explicit.to_explicit(values, N)
    exists = values["exists"]
    pid = values["producer_id"]
    pid_choices = st.sampled_from([pid, pid, pid, pid + 1]) if exists else st.integers(0, 3)
    actions = ["InitProducerId", "AddPartitionsToTxn", "EndTxn", "failover"]
    if exists:
        actions.append("Produce")
    if values["state"] == "Ongoing":
        actions.append("timeout")
    if values["state"].startswith("Prepare"):
        actions.append("WriteTxnMarkers")
    if action is None:
        action = data.draw(st.sampled_from(actions))
    assert action in actions
    epoch = max(values["producer_epoch"], 0)
    # mostly the current epoch, the one before it (zombies, TV2 retries) and the last epoch
    epoch_choices = st.sampled_from([epoch, epoch, epoch, max(epoch - 1, 0), max(values["last_producer_epoch"], 0),
                                     epoch + 1, 0])
    params: dict[str, Any] = {}
    if action == "InitProducerId":
        expected = data.draw(st.booleans())
        rq_pid, rq_epoch = (data.draw(pid_choices), data.draw(epoch_choices)) if expected else (-1, -1)
        params = {"expected": expected, "pid": rq_pid, "epoch": rq_epoch}
        request = InitProducerId(symbolic_vars.TID, symbolic_vars.TIMEOUT_MS, rq_pid, rq_epoch)
        result = coord.handle_init_producer_id(cs, request)
        cs = result.state
    elif action == "AddPartitionsToTxn":
        add = data.draw(st.lists(st.booleans(), min_size=N, max_size=N).filter(lambda x: any(x)))
        params = {"pid": data.draw(pid_choices), "epoch": data.draw(epoch_choices), "tv2": data.draw(st.booleans()),
                  **{f"add{i}": add[i] for i in range(N)}}
        request = AddPartitionsToTxn(symbolic_vars.TID, params["pid"], params["epoch"],
                                     frozenset(P[i] for i in range(N) if add[i]), 2 if params["tv2"] else 0)
        cs = coord.handle_add_partitions_to_txn(cs, request).state
    elif action == "EndTxn":
        params = {"pid": data.draw(pid_choices), "epoch": data.draw(epoch_choices), "commit": data.draw(st.booleans()),
                  "tv2": data.draw(st.booleans())}
        result_kind = TransactionResult.COMMIT if params["commit"] else TransactionResult.ABORT
        end = EndTxn(symbolic_vars.TID, params["pid"], params["epoch"], result_kind, 2 if params["tv2"] else 0)
        cs = coord.handle_end_txn(cs, end).state
    elif action == "timeout":
        cs = txn_expiry.abort_timed_out_transaction(cs, symbolic_vars.TID).state
    elif action == "failover":
        cs = txn_loading.coordinator_failover(cs).state
    elif action == "WriteTxnMarkers":
        md = cs.metadata(symbolic_vars.TID)
        assert md is not None
        outcome = TransactionResult.COMMIT if md.state is TxnState.PREPARE_COMMIT else TransactionResult.ABORT
        markers = txn_markers.markers_for(cs, md, outcome)
        _, marker = data.draw(st.sampled_from(markers))
        i = P.index(marker.partition)
        params = {"partition": i}
        ps, reply = part.append_end_txn_marker(parts[marker.partition], marker.producer_id, marker.producer_epoch,
                                               marker.coordinator_epoch, marker.result, marker.transaction_version)
        if reply.error is not Errors.NONE:
            sym = symbolic_successor(action, values, params)
            assert sym is None, f"z3 accepts a marker the leader rejects: {values}"
            return
        parts = {**parts, marker.partition: ps}
        cs = txn_markers.handle_write_txn_markers_response(cs, symbolic_vars.TID, marker.partition,
                                                           marker.coordinator_epoch, Errors.NONE).state
    elif action == "Produce":
        i = data.draw(st.integers(0, N - 1))
        params = {"partition": i, "epoch": data.draw(st.integers(0, values["producer_epoch"])),
                  "first_seq": data.draw(st.integers(0, 14)), "count": data.draw(st.integers(1, 3)),
                  "transactional": data.draw(st.booleans())}
        name, pid = P[i], values["producer_id"]
        if _verified(cs, parts[name], name, pid, params["epoch"], params["transactional"]):
            ps, _ = part.append_data(parts[name], pid, params["epoch"], params["first_seq"], params["count"],
                                     params["transactional"])
            parts = {**parts, name: ps}
    assert not cs.illegal_transitions, cs.illegal_transitions
    explicit = symbolic_explicit.from_explicit(cs, parts, N)
    assert_agree(explicit, symbolic_successor(action, values, params), (action, params, values))


# The states an action acts in (other states are covered by the mixed test below).
ACTIONS = {
    "InitProducerId": (), "AddPartitionsToTxn": (), "EndTxn": (), "failover": (), "Produce": ("Ongoing",),
    "timeout": ("Ongoing",), "WriteTxnMarkers": ("PrepareCommit", "PrepareAbort"),
}


@pytest.mark.parametrize("action", ACTIONS)
def test_z3_and_explicit_handlers_agree_per_action(action: str) -> None:
    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(states(ACTIONS[action]), st.data())
    def agree(values: dict[str, Any], data: st.DataObject) -> None:
        check_action(values, data, action)
    agree()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(states(), st.data())
def test_z3_and_explicit_handlers_agree(values: dict[str, Any], data: st.DataObject) -> None:
    check_action(values, data)


@pytest.mark.slow
@settings(max_examples=10_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(states(), st.data())
def test_z3_and_explicit_handlers_agree_10000(values: dict[str, Any], data: st.DataObject) -> None:
    check_action(values, data)
