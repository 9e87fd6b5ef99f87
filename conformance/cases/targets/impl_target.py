"""The implementation as a case target: each component's cases run on ``txnspec.impl`` objects.

The mapping from a case's ``given`` / ``when`` to implementation calls, and every case-level convention
(FORMAT.md, CONVENTIONS.md), live in the ``impl_*`` modules next to this one, never in ``impl/``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from txnspec.conformance.cases.format import CaseInputError, CaseSession


def impl_session(component: str, given: Mapping[str, Any]) -> CaseSession:
    if not isinstance(given, Mapping):
        raise CaseInputError(f"'given' must be an object, got {type(given).__name__}")
    if component == "coordinator":
        from txnspec.conformance.cases.targets import impl_coordinator
        return impl_coordinator.session(given)
    if component == "partition":
        from txnspec.conformance.cases.targets import impl_partition
        return impl_partition.session(given)
    if component == "client":
        from txnspec.conformance.cases.targets import impl_client
        return impl_client.session(given)
    if component == "group":
        from txnspec.conformance.cases.targets import impl_group
        return impl_group.session(given)
    raise CaseInputError(f"unknown component {component!r} (expected coordinator, partition, client or group)")
