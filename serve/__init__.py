"""``txnspec serve``: the reference implementation (:mod:`txnspec.impl`) as a Kafka broker on a TCP socket,
for real clients (librdkafka, the Java client, kafka-python, aiokafka).

:mod:`.protocol` frames and the API table, :mod:`.records` record batches v2 (every codec), :mod:`.broker`
(metadata, ApiVersions, dispatch), :mod:`.transactions`, :mod:`.leader` and :mod:`.groups` the requests on the
implementation, :mod:`.admin`, :mod:`.group_admin` and :mod:`.txn_admin` topic, config, cluster, group and
transaction admin, :mod:`.configs` Kafka's topic configs, :mod:`.codes` Kafka's error codes beyond the
implementation's, :mod:`.server` the asyncio server (a memory pool across connections), :mod:`.testing` pytest
fixtures, :mod:`.java_harness` the Java client's harnesses (consume-transform-produce; transaction admin).
"""
