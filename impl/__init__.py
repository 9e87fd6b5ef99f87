"""The reference implementation of Kafka's exactly-once protocol (sans-I/O, deterministic).

Entry points: :class:`txnspec.impl.cluster.Cluster` (the oracle: broker + clock + explicit network with
blocking producer/consumer handles), :mod:`txnspec.impl.testing` (pytest fixtures), and the components
it is built from, each following one Kafka class: :mod:`~txnspec.impl.partition` (``UnifiedLog``),
:mod:`~txnspec.impl.producer_state` (``ProducerStateManager``), :mod:`~txnspec.impl.coordinator`
(``TransactionCoordinator``; its log :mod:`~txnspec.impl.txn_state_manager`, its markers
:mod:`~txnspec.impl.txn_markers`), :mod:`~txnspec.impl.txn_metadata` (``TransactionMetadata``),
:mod:`~txnspec.impl.group` (``GroupMetadataManager`` offsets), :mod:`~txnspec.impl.client` (``KafkaProducer``;
its :mod:`~txnspec.impl.transaction_manager` and :mod:`~txnspec.impl.sender`), :mod:`~txnspec.impl.consumer`
(``CompletedFetch``), :mod:`~txnspec.impl.storage` (segment files, snapshots, recovery). Every component is
built with the replaceable rules of :mod:`~txnspec.impl.policy` (Kafka's by default); :mod:`~txnspec.impl.mutants` holds
the seeded bugs as overrides of them, and no component imports it. It imports nothing from the spec.
"""
