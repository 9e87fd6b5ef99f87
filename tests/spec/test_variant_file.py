"""``--variant-file``: a user-written variant is loaded, checked and used; a bad file is exit 2 naming it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from txnspec.cli import main
from txnspec.spec.variants import VARIANTS, variant_named
from txnspec.spec.variants.user import VariantFileError, load_variant_file

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "end_txn_keeps_epoch.py"
HEADER = "from txnspec.spec.variants import Variant\n"


def test_the_example_is_registered_and_checked(capsys: pytest.CaptureFixture[str]) -> None:
    variant = load_variant_file(EXAMPLE)
    assert variant_named("end-txn-keeps-epoch") is variant
    assert load_variant_file(EXAMPLE) is variant  # loading twice gives the same variant
    # without the epoch bump at EndTxn a delayed EndTxn decides the next transaction (what KIP-890 part 2 fixed)
    assert main(["check", "--scenario", "delayed-end-txn", "--variant-file", str(EXAMPLE), "--no-liveness"]) == 1
    out = capsys.readouterr().out
    assert "variant=end-txn-keeps-epoch" in out
    assert "VIOLATED  always    end_txn_applies_to_its_transaction" in out
    assert main(["check", "--scenario", "delayed-end-txn", "--no-liveness"]) == 0  # current holds


def test_a_user_variant_is_checked_without_symmetry_unless_asked(capsys: pytest.CaptureFixture[str]) -> None:
    """A user's variant may single out a name; the reduction is kept only on request (--symmetry)."""
    command = ["check", "--scenario", "failover", "--variant-file", str(EXAMPLE), "--no-liveness", "--json"]
    states = {}
    for extra in ([], ["--symmetry"], ["--no-symmetry"]):
        assert main([*command, *extra]) in (0, 1)
        states[tuple(extra)] = json.loads(capsys.readouterr().out)["states"]
    assert states[()] == states[("--no-symmetry",)] == 192 and states[("--symmetry",)] == 102
    assert main(["check", "--scenario", "failover", "--symmetry", "--no-symmetry"]) == 2


@pytest.mark.parametrize(("name", "text", "problem"), [
    ("syntax.py", HEADER + "VARIANT = Variant(\n", "has a syntax error at line 2"),
    ("raises.py", HEADER + "x = 1\nVARIANT = Variant('r', 'd', 'ref', change_protocol=undefined_name)\n",
     "raised NameError at line 3: name 'undefined_name' is not defined"),
    ("none.py", HEADER + "MY_VARIANT = Variant('n', 'd', 'ref')\n", "defines no VARIANT"),
    ("wrong_type.py", "from txnspec.spec.protocol import CURRENT\nVARIANT = CURRENT.but('w', 'd')\n",
     "VARIANT is a Protocol, not a txnspec.spec.variants.Variant"),
    ("bad_change.py", HEADER + "VARIANT = Variant('b', 'd', 'ref', change_protocol=lambda p: 'oops')\n",
     "change_protocol of 'b' returned a str, not a Protocol"),
    ("fails.py", HEADER + "VARIANT = Variant('f', 'd', 'ref', change_scenario=lambda s: s.with_(max_epoch=0))\n",
     "variant 'f' failed when applied: ValueError"),
    ("clash.py", HEADER + "VARIANT = Variant('tv1', 'd', 'ref')\n", "the name 'tv1' is already a variant"),
    ("notes.txt", "VARIANT = 1\n", "is not a Python file"),
])
def test_bad_files_name_the_file_and_the_problem(tmp_path: Path, name: str, text: str, problem: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(VariantFileError) as raised:
        load_variant_file(path)
    assert str(path) in str(raised.value) and problem in str(raised.value)
    assert VARIANTS["tv1"].reference == "KIP-98"  # a clash leaves the built-in alone
    for command in (["check", "--scenario", "tiny"], ["diff", "--scenario", "tiny"]):
        assert main([*command, "--variant-file", str(path)]) == 2
        err = capsys.readouterr().err
        assert str(path) in err and problem in err and "Traceback" not in err


def test_a_missing_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--variant-file", "no/such/variant.py"]) == 2
    assert "variant file 'no/such/variant.py' does not exist" in capsys.readouterr().err
