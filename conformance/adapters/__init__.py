"""Replay adapters: the spec's own (:mod:`.spec_adapter`) and, later, the implementation's.

An adapter drives one system under test through a trace; the contract is
:class:`txnspec.conformance.replay.Adapter`.
"""

from __future__ import annotations

from typing import Any

ADAPTERS = ("spec", "spec-mutant:<mutation>", "impl", "impl-mutant:<mutant>")


def make_adapter(name: str) -> Any:
    """The adapter called ``name``: ``spec``, ``spec-mutant:<mutation>`` (a deliberately wrong spec, for
    testing the suite), ``impl`` (the reference implementation, :mod:`.impl_adapter`) or
    ``impl-mutant:<mutant>`` (the implementation with a seeded bug, :mod:`txnspec.conformance.mutation`)."""
    from txnspec.conformance.adapters.spec_adapter import SpecAdapter

    if name == "spec":
        return SpecAdapter()
    if name.startswith("spec-mutant:"):
        return SpecAdapter(name.removeprefix("spec-mutant:"))
    if name == "impl":
        try:
            from txnspec.conformance.adapters.impl_adapter import ImplAdapter
        except ModuleNotFoundError:
            raise ValueError("the implementation's adapter is not built yet "
                             "(txnspec.conformance.adapters.impl_adapter)") from None
        return ImplAdapter()
    if name.startswith("impl-mutant:"):
        from txnspec.conformance.adapters.impl_mutant import ImplMutantAdapter

        return ImplMutantAdapter(name.removeprefix("impl-mutant:"))
    raise ValueError(f"unknown adapter {name!r}; known: {', '.join(ADAPTERS)}")
