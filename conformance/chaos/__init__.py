"""``txnspec chaos``: real Kafka under faults. A 3-node KRaft cluster (:mod:`.cluster`), a seeded schedule of
faults (:mod:`.faults`), real clients recording a typed history (:mod:`.workload`, :mod:`.history`), and two
checkers over it: anomalies with minimal witnesses (:mod:`.anomalies`) and validation of the observed logs
against the spec's partition model (:mod:`.validate`). See docs/chaos.md.
"""
