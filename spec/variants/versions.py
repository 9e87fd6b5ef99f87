"""Protocol versions as variants: transaction version 1 (classic), without partition verification, Kafka 3.9.

* ``tv1``: the classic protocol (KIP-98) on a trunk broker: no epoch bump at EndTxn, AddPartitionsToTxn
  before producing, partition verification on (KIP-890 part 1, default since 3.6... per broker config).
* ``tv1-no-verification``: the classic protocol as before KIP-890 part 1
  (``transaction.partition.verification.enable=false``): leaders append transactional batches blindly.
* ``kafka-3.9``: ``tv1`` with Kafka 3.9's table of valid transitions (no abort from Empty/Complete*).
"""

from __future__ import annotations

from dataclasses import replace

from txnspec.spec.txn_state import VALID_PREVIOUS_STATES_3_9
from txnspec.spec.variants.registry import Variant, register

TV1 = register(Variant(
    "tv1", "transaction version 1 (classic): the epoch changes only on InitProducerId and fencing", "KIP-98",
    change_scenario=lambda s: s.with_(transaction_version=0)))

TV1_NO_VERIFICATION = register(Variant(
    "tv1-no-verification", "transaction version 1 without partition verification (before KIP-890 part 1)",
    "KIP-890 part 1",
    change_scenario=lambda s: s.with_(transaction_version=0, partition_verification=False)))

KAFKA_3_9 = register(Variant(
    "kafka-3.9", "transaction version 1 with Kafka 3.9's valid-previous-states table", "Kafka 3.9",
    change_protocol=lambda p: p.but(
        "kafka-3.9", "Kafka 3.9 transition table",
        coordinator_config=replace(p.coordinator_config, valid_previous_states=VALID_PREVIOUS_STATES_3_9)),
    change_scenario=lambda s: s.with_(transaction_version=0)))
