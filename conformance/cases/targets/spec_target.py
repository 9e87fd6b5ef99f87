"""The spec as a case target: each component's cases run on the spec's component handlers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from txnspec.conformance.cases.format import CaseInputError, CaseSession


def spec_session(component: str, given: Mapping[str, Any]) -> CaseSession:
    if component == "coordinator":
        from txnspec.conformance.cases.targets import spec_coordinator
        return spec_coordinator.session(given)
    if component == "partition":
        from txnspec.conformance.cases.targets import spec_partition
        return spec_partition.session(given)
    if component == "client":
        from txnspec.conformance.cases.targets import spec_client
        return spec_client.session(given)
    if component == "group":
        from txnspec.conformance.cases.targets import spec_group
        return spec_group.session(given)
    raise CaseInputError(f"unknown component {component!r}")
