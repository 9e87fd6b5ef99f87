"""Which system's spec a scenario belongs to: Kafka's (this package), RocketMQ's or Pulsar's.

``txnspec check --scenario NAME`` looks the name up here. Kafka's scenarios keep their short names
(``default``, ``zombie``...); the other systems' scenarios carry their system's prefix
(``rocketmq-...``, ``pulsar-...``), so a name says which spec it runs. Each other system is a package
``spec/<system>/`` whose ``model`` module provides ``SCENARIOS`` and ``VARIANTS`` (name -> an object
with ``name``, ``description`` and, for variants, ``reference`` and ``expected_violation``),
``build_model(scenario, variant="current")`` and ``GUARANTEES`` (see :mod:`txnspec.spec.guarantees`).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from txnspec.checker.model import Model
from txnspec.spec.guarantees import KAFKA, GuaranteeRow


@dataclass(frozen=True)
class SystemSpec:
    name: str
    title: str
    scenarios: dict[str, Any]
    variants: dict[str, Any]
    guarantees: Sequence[GuaranteeRow]
    module: ModuleType | None

    def build_model(self, scenario: str, variant: str = "current") -> Model[Any]:
        if scenario not in self.scenarios:
            raise KeyError(f"unknown scenario {scenario!r} of {self.title}; known: {', '.join(self.scenarios)}")
        if variant not in self.variants:
            raise KeyError(f"unknown variant {variant!r} of {self.title}; known: {', '.join(self.variants)}")
        if self.module is None:
            from txnspec.spec.model import build_model

            return build_model(scenario, variant)
        result: Model[Any] = self.module.build_model(scenario, variant)
        return result


OTHER_SYSTEMS = (("rocketmq", "RocketMQ"), ("pulsar", "Pulsar"))


def _kafka() -> SystemSpec:
    from txnspec.spec.scenarios import SCENARIOS
    from txnspec.spec.variants import VARIANTS, variant_named

    variant_named("current")  # loads every variant module
    return SystemSpec("kafka", "Kafka", dict(SCENARIOS), dict(VARIANTS), KAFKA, None)


def systems() -> list[SystemSpec]:
    """Kafka, then every other system whose package is installed."""
    found = [_kafka()]
    for name, title in OTHER_SYSTEMS:
        module_name = f"txnspec.spec.{name}.model"
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue
        found.append(SystemSpec(name, title, dict(module.SCENARIOS), dict(module.VARIANTS),
                                tuple(module.GUARANTEES), module))
    return found


def system_named(name: str) -> SystemSpec:
    for system in systems():
        if system.name == name:
            return system
    raise KeyError(f"unknown system {name!r}; known: {', '.join(s.name for s in systems())}")


def system_of(scenario: str) -> SystemSpec:
    """The system whose spec has ``scenario``; ``KeyError`` listing every known scenario otherwise."""
    every = systems()
    for system in every:
        if scenario in system.scenarios:
            return system
    known = ", ".join(name for s in every for name in s.scenarios)
    raise KeyError(f"unknown scenario {scenario!r}; known: {known}")


def build_model(scenario: str, variant: str = "current") -> Model[Any]:
    """The model of ``scenario`` (of whichever system has it) under ``variant``."""
    return system_of(scenario).build_model(scenario, variant)
