"""``txnspec serve``: the reference implementation (:mod:`txnspec.impl`) as a Kafka broker on a TCP socket,
for real clients (librdkafka, the Java client, kafka-python, aiokafka).

:mod:`.protocol` frames and the API table, :mod:`.records` record batches v2, :mod:`.broker` (metadata and
dispatch), :mod:`.transactions`, :mod:`.leader` and :mod:`.groups` the requests on the implementation,
:mod:`.server` the asyncio server, :mod:`.testing` pytest fixtures, :mod:`.java_harness` the Java client's
consume-transform-produce harness.
"""
