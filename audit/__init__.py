"""``txnspec audit``: real Kafka-protocol brokers checked against the spec, on the wire and through a client.

``report`` is the shared result format; ``targets`` starts or reaches a broker; ``wire`` replays
request-level sequences over Kafka's binary protocol; ``workload`` and ``history`` drive a real client
and check the recorded history for anomalies.
"""
