"""``txnspec chaos``: real Kafka under faults. A 3-node KRaft cluster (:mod:`.cluster`), a seeded schedule of
faults (:mod:`.faults`), real clients recording a typed history (:mod:`.workload`, :mod:`.history`), and two
checkers over it: anomalies with minimal witnesses (:mod:`.anomalies`) and validation of the observed logs
against the spec's partition model (:mod:`.validate`). It stands on the audit's Kafka resolution and broker
connection (:mod:`txnspec.audit.kafka`, :mod:`txnspec.audit.connection`). See docs/chaos.md.
"""
