"""A protocol change to check before making it: the TV2 coordinator ends a transaction without bumping the epoch.

KIP-890 part 2 bumps the producer epoch at every EndTxn, so that a late or duplicated EndTxn of one
transaction cannot end the next one. This variant asks what goes wrong without that bump: the
coordinator handles a transaction version 2 EndTxn with the classic (TV1) rules, everything else stays.

    txnspec check --variant-file docs/examples/end_txn_keeps_epoch.py --scenario delayed-end-txn
    txnspec diff --variant-file docs/examples/end_txn_keeps_epoch.py --scenario delayed-end-txn --variant current
"""

from dataclasses import replace
from typing import Any

from txnspec.spec import coordinator as coord
from txnspec.spec.coordinator_state import CoordinatorResult, CoordinatorState
from txnspec.spec.messages import EndTxn
from txnspec.spec.variants import Variant


def end_txn_without_epoch_bump(cs: CoordinatorState, request: EndTxn, **kw: Any) -> CoordinatorResult:
    """``TransactionCoordinator.handleEndTransaction`` as if the client had sent a TV1 EndTxn (no bump)."""
    return coord.handle_end_txn(cs, replace(request, transaction_version=0), **kw)


VARIANT = Variant(
    name="end-txn-keeps-epoch",
    description="TV2, but EndTxn does not bump the producer epoch (KIP-890 part 2 undone at the coordinator)",
    reference="KIP-890 part 2",
    change_protocol=lambda p: p.but("end-txn-keeps-epoch", "EndTxn without the epoch bump",
                                    handle_end_txn=end_txn_without_epoch_bump),
)
