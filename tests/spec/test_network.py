"""The network's bag (spec/network.py): one order in every process, whatever its string-hash salt."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from txnspec.spec.messages import AddPartitionsToTxn
from txnspec.spec.network import (
    Envelope,
    ProducerAddress,
    bag,
    parse_address,
    producer_address,
    producer_index,
    stable_repr,
)

pytestmark = pytest.mark.quick  # the whole module is in the quick tier

# three AddPartitionsToTxn of one producer that differ only in their set of partitions: a frozenset's repr
# follows the salt (PYTHONHASHSEED 1 renders {'p0', 'p1'}, 2 renders {'p1', 'p0'}), so a repr-sorted bag does too
ORDER_OF_A_BAG = """
from txnspec.spec.messages import AddPartitionsToTxn
from txnspec.spec.network import Envelope, bag
sets = [frozenset({"p1"}), frozenset({"p0", "p1"}), frozenset({"p0"}), frozenset({"p1", "p2"})]
envelopes = [Envelope("producer-0", "coordinator", AddPartitionsToTxn("t1", 0, 0, s, 1), 1, None) for s in sets]
print(repr(frozenset({"p0", "p1"})))
print([sorted(e.body.partitions) for e in bag(tuple(envelopes))])
"""


def _in_process_with_salt(seed: str) -> tuple[str, str]:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    rendered, order = subprocess.run([sys.executable, "-c", ORDER_OF_A_BAG], env=env, capture_output=True, text=True,
                                     check=True).stdout.splitlines()
    return rendered, order


def test_a_bag_has_one_order_whatever_the_salt() -> None:
    (set_a, order_a), (set_b, order_b) = _in_process_with_salt("1"), _in_process_with_salt("2")
    assert set_a != set_b  # the salts render the set differently: the test can tell
    assert order_a == order_b


def test_stable_repr_is_repr_with_sorted_sets() -> None:
    envelope = Envelope(producer_address(0), "coordinator",
                        AddPartitionsToTxn("t1", 0, 0, frozenset({"p1", "p0"}), 1), 3, (0, 0, 1))
    assert stable_repr(envelope) == (
        "Envelope(source='producer-0', target='coordinator', body=AddPartitionsToTxn(transactional_id='t1', "
        "producer_id=0, producer_epoch=0, partitions=frozenset({'p0', 'p1'}), transaction_version=1), context=3, "
        "tag=(0, 0, 1))")
    assert stable_repr(frozenset()) == "frozenset()" and stable_repr((1,)) == "(1,)"
    assert bag((envelope, envelope)) == (envelope, envelope)


def test_a_producer_address_is_a_value_shown_as_its_name() -> None:
    """The model reads a producer's index from its address's field; the text ``producer-k`` is for reports and
    trace files (read back only by the trace format's decoder), and orders bags as the name did."""
    address = producer_address(3)
    assert address is producer_address(3) and type(address) is ProducerAddress and address.index == 3
    assert str(address) == "producer-3" and address != "producer-3"
    assert producer_index(address) == 3 and producer_index("coordinator") is None
    assert producer_index("producer-3") is None  # a server's name is never read as a producer's
    assert parse_address("producer-3") is address and parse_address("p0") == "p0"
    assert parse_address("producer-x") == "producer-x"
