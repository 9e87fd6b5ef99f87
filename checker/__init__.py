"""Generic model-checking engines: they know nothing of Kafka, only the contract in :mod:`.model`."""

from txnspec.checker.explicit import check
from txnspec.checker.model import Expectation, Model, Property
from txnspec.checker.report import CheckResult, Counterexample, PropertyVerdict

__all__ = ["CheckResult", "Counterexample", "Expectation", "Model", "Property", "PropertyVerdict", "check"]
