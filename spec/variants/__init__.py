"""Protocol variants: older or deliberately broken behaviour, each a small override of named handlers.

A variant is a :class:`Variant`: a name, what it changes and which Kafka issue or KIP it stands for, a
function from :class:`~txnspec.spec.protocol.Protocol` to protocol (override handlers by name, as
hachikuji's ``Kip101.tla`` replaces one action of the replication spec), and optionally a change to the
scenario (a transaction version, verification off). ``current`` is Kafka trunk with every fix.

Each buggy variant is pinned in ``tests/spec/test_variants.py``: the checker finds a shortest
counterexample violating the named property, and the same scenario under ``current`` holds.
"""

from __future__ import annotations

from txnspec.spec.variants.registry import VARIANTS, Variant, register

__all__ = ["VARIANTS", "Variant", "register", "variant_named"]


def variant_named(name: str) -> Variant:
    _load()
    try:
        return VARIANTS[name]
    except KeyError:
        raise KeyError(f"unknown variant {name!r}; known: {', '.join(sorted(VARIANTS))}") from None


def _load() -> None:
    from txnspec.spec.variants import bugs, two_phase, versions  # noqa: F401  (registers the variants)


register(Variant("current", "Kafka trunk (4.x) with the scenario's transaction version", "apache/kafka trunk"))
