"""Issue 31's model-checked paths replay on the implementation: producer-id expiry, transactional-id expiry and an
admin's plain OffsetCommit, taken by random walks of their scenarios at both transaction versions."""

from __future__ import annotations

import pytest

from txnspec.conformance import generate as gen
from txnspec.conformance.replay import replay


@pytest.mark.parametrize("variant", ["current", "tv1"])
@pytest.mark.parametrize(("scenario", "kind"), [("producer-expiry", "expire producer ids"),
                                                ("id-expiry", "expire transactional id"),
                                                ("plain-commit", "plain OffsetCommit")])
def test_the_expiries_and_the_plain_commit_replay_on_the_implementation(scenario: str, kind: str,
                                                                        variant: str) -> None:
    from txnspec.conformance.adapters.impl_adapter import ImplAdapter

    walks = [t for t in (gen.random_walk(scenario, s, variant=variant) for s in range(30)) if kind in t.kinds()]
    assert len(walks) >= 10  # the step is taken, not merely allowed
    for trace in walks:
        verdict = replay(trace, ImplAdapter())
        assert verdict.ok, verdict.detail
