"""User-written protocol variants: a Python file that defines ``VARIANT``, loaded by ``--variant-file``.

What is modelled
    A change someone wants to check before making it, written outside the package with the mechanism the
    built-in variants use: a :class:`~txnspec.spec.variants.Variant` whose ``change_protocol`` overrides
    named handlers with :meth:`Protocol.but <txnspec.spec.protocol.Protocol.but>` (and whose
    ``change_scenario`` may set the transaction version). ``docs/variants.md`` has a worked example, shipped
    as ``docs/examples/end_txn_keeps_epoch.py``.

    Loading a file runs it as a module, checks that it defines ``VARIANT`` as a ``Variant`` whose
    functions return a ``Protocol`` and a ``Scenario``, and registers it by its name, so every command
    that takes ``--variant NAME`` finds it. Every problem is a :class:`VariantFileError` naming the file
    and what is wrong (missing, not Python, a syntax error with its line, an exception while running it,
    no ``VARIANT``, the wrong type, a name a built-in variant has).

Assumptions
    The file is trusted code (it runs with the user's rights, as a test file does). Loading the same file
    twice gives the variant already registered.
"""

from __future__ import annotations

import importlib.util
import traceback
from collections.abc import Iterable
from pathlib import Path

from txnspec.spec.protocol import CURRENT, Protocol
from txnspec.spec.scenarios import SCENARIOS, Scenario
from txnspec.spec.variants import VARIANTS, Variant, variant_named

_LOADED: dict[Path, Variant] = {}


class VariantFileError(ValueError):
    """A variant file that cannot be used; the message names the file and the problem."""


def load_variant_file(path: str | Path) -> Variant:
    """Load, check and register the variant ``path`` defines (see the module docstring)."""
    file = Path(path)
    where = str(path)
    if not file.is_file():
        raise VariantFileError(f"variant file {where!r} does not exist" if not file.exists()
                               else f"variant file {where!r} is not a file")
    if file.suffix != ".py":
        raise VariantFileError(f"variant file {where!r} is not a Python file (.py)")
    resolved = file.resolve()
    if resolved in _LOADED:
        return _LOADED[resolved]
    variant_named("current")  # the built-in variants first, so that a clash is seen
    source = file.read_text(encoding="utf-8", errors="replace")
    try:
        code = compile(source, where, "exec")
    except SyntaxError as exc:
        raise VariantFileError(f"variant file {where!r} has a syntax error at line {exc.lineno}: {exc.msg}") from None
    spec = importlib.util.spec_from_file_location(f"txnspec_user_variant_{len(_LOADED)}", resolved)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    module.__file__ = str(resolved)
    try:
        exec(code, module.__dict__)
    except SystemExit as exc:  # sys.exit in a variant file must not end the command that loads it
        raise VariantFileError(f"variant file {where!r} called sys.exit({exc.code!r}) while loading") from None
    except Exception as exc:
        frame = next((f for f in reversed(traceback.extract_tb(exc.__traceback__)) if f.filename == where), None)
        line = f" at line {frame.lineno}" if frame is not None else ""
        raise VariantFileError(f"variant file {where!r} raised {type(exc).__name__}{line}: {exc}") from None
    if "VARIANT" not in module.__dict__:
        raise VariantFileError(f"variant file {where!r} defines no VARIANT (assign a "
                               "txnspec.spec.variants.Variant to VARIANT, see docs/variants.md)")
    variant = module.__dict__["VARIANT"]
    if not isinstance(variant, Variant):
        raise VariantFileError(f"variant file {where!r}: VARIANT is a {type(variant).__name__}, "
                               "not a txnspec.spec.variants.Variant")
    _check(variant, where)
    if variant.name in VARIANTS:
        raise VariantFileError(f"variant file {where!r}: the name {variant.name!r} is already a variant; "
                               "give yours another name")
    VARIANTS[variant.name] = variant
    _LOADED[resolved] = variant
    return variant


def load_variant_files(files: Iterable[str | Path]) -> list[str]:
    """Load each file (:func:`load_variant_file`); the names of the variants they define."""
    return [load_variant_file(file).name for file in files]


def _check(variant: Variant, where: str) -> None:
    """Call the variant's functions once, so that a mistake shows now and names the file."""
    try:
        protocol = variant.change_protocol(CURRENT)
        scenario = variant.change_scenario(SCENARIOS["tiny"])
    except Exception as exc:
        raise VariantFileError(f"variant file {where!r}: variant {variant.name!r} failed when applied: "
                               f"{type(exc).__name__}: {exc}") from None
    if not isinstance(protocol, Protocol):
        raise VariantFileError(f"variant file {where!r}: change_protocol of {variant.name!r} returned a "
                               f"{type(protocol).__name__}, not a Protocol (use protocol.but(...))")
    if not isinstance(scenario, Scenario):
        raise VariantFileError(f"variant file {where!r}: change_scenario of {variant.name!r} returned a "
                               f"{type(scenario).__name__}, not a Scenario (use scenario.with_(...))")
