"""A picklable recipe for a model: what a distributed search ships to its executors.

What is modelled
    ``txnspec check`` builds its model from a scenario and a variant name
    (:func:`txnspec.spec.catalog.build_model`). A search on Spark (:func:`txnspec.checker.spark_bfs.check_spark`)
    needs the same model in every executor, and a model is made of closures that do not pickle. A
    :class:`ModelFactory` is the names instead: a frozen value that pickles by reference to this module and
    builds the model where it is called.

Assumes
    The executors import this package (same installation as the driver), and a user-written variant file
    (``--variant-file``) is at the same path on every machine, as ``txnspec conform`` assumes.

Leaves out
    Models that are not named in the catalog (a test's toy model ships as a top-level function instead).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from txnspec.checker.model import Model


@dataclass(frozen=True)
class ModelFactory:
    """``ModelFactory("zombie", "tv1")()`` is ``build_model("zombie", "tv1")``, in any process (with
    ``partial_order``, its :meth:`~txnspec.checker.model.Model.partial_order`)."""

    scenario: str
    variant: str = "current"
    variant_file: str | None = None  # loaded before the model is built, so that its variant is known
    partial_order: bool = False  # the model's partial-order reduction (``Model.partial_order``)

    def __call__(self) -> Model[Any]:
        if self.variant_file is not None:
            from txnspec.spec.variants.user import load_variant_file

            load_variant_file(self.variant_file)
        from txnspec.spec.catalog import build_model

        model = build_model(self.scenario, self.variant)
        return model.partial_order() if self.partial_order else model
