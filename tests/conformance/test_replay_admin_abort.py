"""The admin's abort of a transaction (``Admin.abortTransaction``: WriteTxnMarkers from the admin to the partition
leader, the coordinator not consulted) replays on the implementation in lock step: the covering traces of the
``admin-abort`` scenario (shortest paths to every action kind and coordinator transition) that take the step,
at both transaction versions. (Random walks rarely crash the producer with its transaction open.)"""

from __future__ import annotations

import pytest

from txnspec.conformance import generate as gen
from txnspec.conformance.replay import replay


@pytest.mark.parametrize("variant", ["current", "tv1"])
def test_the_admin_abort_replays_on_the_implementation(variant: str) -> None:
    from txnspec.conformance.adapters.impl_adapter import ImplAdapter

    walks = [t for t in gen.covering_traces("admin-abort", variant=variant) if "admin abort" in t.kinds()]
    assert walks  # the step is taken, not merely allowed
    for trace in walks:
        verdict = replay(trace, ImplAdapter())
        assert verdict.ok, verdict.detail
