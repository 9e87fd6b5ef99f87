"""RocketMQ's transactional-message properties, each with the verdict its source leads us
to expect under the consistent listener.

Safety (``always``, each with a ``sometimes`` partner)
    * R-S1 ``visible_implies_locally_committed``: holds; fails with the inconsistent listener (#8158).
    * R-S2 ``rolled_back_never_visible``: holds; fails with the inconsistent listener.
    * R-S3 ``at_most_one_committed_copy``: **fails**: a duplicated END (#5574), the original END plus a
      check reply (#8158 (1), #7933), a half-send retry's orphan, a crash losing the op batch.
    * R-S4 ``no_commit_and_rollback``: holds; fails with the inconsistent listener (#8158 (2)).
    * R-S5 ``op_record_implies_decision_durable``: holds (the real message is put before the op record).
    * R-S6 ``checks_bounded``: holds per half; fails per transaction with a half-send retry's orphan,
      whose copies are checked on their own count ([derived], RULES §1.10 item 6).
    * R-S7 ``no_check_after_resolution``: **fails**: the op record is still in memory, or names an offset
      the loop has passed (#8158 (3), #9640).

Liveness (``leads_to``, under weak fairness of deliveries, the check loop and the op batch writer)
    * R-L1 ``every_half_resolved_or_discarded``: holds.
    * R-L2 ``committed_eventually_visible``: **fails**: a local transaction that finishes (commits) after
      its half was checked ``transactionCheckMax`` times is discarded and never delivered (RULES §1.10,
      "a producer group that is down for about 7.5 min loses its transactions").
"""

from __future__ import annotations

from collections.abc import Callable

from txnspec.checker.model import Property
from txnspec.spec.rocketmq.system import Local, RocketState


def committed_count(state: RocketState, key: int) -> int:
    return state.broker.real_queue.count(key)


def half_keys(state: RocketState) -> set[int]:
    return {e.key for e in state.broker.half_queue}


def rollback_recorded(state: RocketState, key: int) -> bool:
    return any(state.broker.half_queue[q].key == key for q in state.ghost.rolled_back)


def checks_issued(state: RocketState, key: int) -> int:
    """Each check re-puts a copy with ``TRANSACTION_CHECK_TIMES`` + 1: a copy is one check issued."""
    return sum(1 for e in state.broker.half_queue if e.key == key and e.check_times > 0)


def settled(state: RocketState, key: int) -> bool:
    """Resolved by an accepted END, or discarded after ``transactionCheckMax`` checks."""
    discarded = any(state.broker.half_queue[q].key == key for q in state.broker.discarded)
    return key in state.ghost.resolved or discarded


# --- safety ------------------------------------------------------------------------------------------

def visible_implies_locally_committed(state: RocketState) -> bool:
    return all(state.txns[k].local is Local.COMMITTED for k in set(state.broker.real_queue))


def rolled_back_never_visible(state: RocketState) -> bool:
    return all(committed_count(state, t.key) == 0 for t in state.txns if t.local is Local.ROLLED_BACK)


def at_most_one_committed_copy(state: RocketState) -> bool:
    return all(state.broker.real_queue.count(k) <= 1 for k in set(state.broker.real_queue))


def no_commit_and_rollback(state: RocketState) -> bool:
    return not any(committed_count(state, k) > 0 and rollback_recorded(state, k) for k in half_keys(state))


def op_record_implies_decision_durable(state: RocketState) -> bool:
    return all(state.broker.half_queue[q].key in state.broker.real_queue
               for q in state.broker.op_durable & state.ghost.committed)


def make_checks_bounded(check_max: int) -> Callable[[RocketState], bool]:
    def checks_bounded(state: RocketState) -> bool:
        return all(checks_issued(state, k) <= check_max for k in half_keys(state))
    return checks_bounded


def no_check_after_resolution(state: RocketState) -> bool:
    return not state.ghost.late_checks


# --- partners ----------------------------------------------------------------------------------------

def some_message_visible(state: RocketState) -> bool:
    return bool(state.broker.real_queue)


def some_rollback_recorded(state: RocketState) -> bool:
    return bool(state.ghost.rolled_back)


def some_check_issued(state: RocketState) -> bool:
    return any(e.check_times > 0 for e in state.broker.half_queue)


def some_half_discarded(state: RocketState) -> bool:
    return bool(state.broker.discarded)


# --- liveness ----------------------------------------------------------------------------------------

def some_half_unsettled(state: RocketState) -> bool:
    return any(not settled(state, k) for k in half_keys(state))


def every_half_settled(state: RocketState) -> bool:
    return not some_half_unsettled(state)


def some_committed_invisible(state: RocketState) -> bool:
    return any(t.local is Local.COMMITTED and t.key not in state.broker.real_queue for t in state.txns)


def every_committed_visible(state: RocketState) -> bool:
    return not some_committed_invisible(state)


def properties(check_max: int) -> list[Property[RocketState]]:
    return [
        Property.always("visible_implies_locally_committed", visible_implies_locally_committed,
                        partner="some_message_visible",
                        description="R-S1: a message reaches the real topic only if its local transaction committed."),
        Property.always("rolled_back_never_visible", rolled_back_never_visible, partner="some_rollback_recorded",
                        description="R-S2: a transaction whose local transaction rolled back is never visible."),
        Property.always("at_most_one_committed_copy", at_most_one_committed_copy, partner="some_message_visible",
                        description="R-S3: at most one real message per transaction (expected to fail)."),
        Property.always("no_commit_and_rollback", no_commit_and_rollback, partner="some_rollback_recorded",
                        description="R-S4: no transaction is both committed and rolled back by the broker."),
        Property.always("op_record_implies_decision_durable", op_record_implies_decision_durable,
                        partner="some_message_visible",
                        description="R-S5: a written op record of a commit implies its real message was put."),
        Property.always("checks_bounded", make_checks_bounded(check_max), partner="some_check_issued",
                        description="R-S6: a transaction is checked at most transactionCheckMax times."),
        Property.always("no_check_after_resolution", no_check_after_resolution, partner="some_check_issued",
                        description="R-S7: once an END resolved a transaction, it is not checked again "
                                    "(expected to fail)."),
        Property.sometimes("some_message_visible", some_message_visible,
                           description="Some transaction's message reached the real topic."),
        Property.sometimes("some_rollback_recorded", some_rollback_recorded,
                           description="Some END rolled a transaction back."),
        Property.sometimes("some_check_issued", some_check_issued,
                           description="The broker checked some transaction back."),
        Property.sometimes("some_half_discarded", some_half_discarded,
                           description="Some half was discarded after transactionCheckMax checks."),
        Property.leads_to("every_half_resolved_or_discarded", some_half_unsettled, every_half_settled,
                          description="R-L1: every half message is eventually resolved or discarded."),
        Property.leads_to("committed_eventually_visible", some_committed_invisible, every_committed_visible,
                          description="R-L2: a locally committed transaction eventually becomes visible "
                                      "(expected to fail)."),
    ]
