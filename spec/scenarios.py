"""Named, bounded configurations of the system model: what the model checker explores.

Each scenario fixes the actors (transactional ids, producer instances per id, partitions), what the
application does (transactions per producer, records per transaction, whether it commits consumer
offsets), the bounds that stand for Kafka's large numbers (epochs, sequences), the environment's fault
budget, and the transaction version. ``expected_states`` pins the distinct-state count of the current
protocol under the scenario (a test asserts it: a silent change in the count means the spec changed).

Bounds standing for Kafka's: ``max_epoch`` stands for ``Short.MAX_VALUE`` (epochs at ``max_epoch - 1``
and above are exhausted, as 32766 is); ``max_sequence`` for ``Integer.MAX_VALUE`` (sequences wrap to 0
after it). ``max_messages_in_flight`` bounds the network (a duplicate is only made while fewer messages
are in flight); ``max_in_flight`` is the client's ``max.in.flight.requests.per.connection`` per partition
(1 to 5, Kafka's default 5: the broker's duplicate window, ``ProducerStateEntry.NUM_BATCHES_TO_RETAIN``, holds
five batches so that every batch a client can retry is recognised).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

GROUP_PROTOCOLS = ("classic", "consumer")  # ConsumerConfig group.protocol
MAX_IN_FLIGHT = 5  # ProducerConfig: idempotence requires max.in.flight.requests.per.connection <= 5
FAULTS = ("loss", "duplicate", "append_failure", "timeout", "failover", "crash", "expire_batch", "rebalance",
          "expire_producer", "expire_transactional_id", "plain_commit", "admin_abort", "slow_failover")


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    transactional_ids: tuple[str, ...] = ("t1",)
    producers_per_id: int = 1
    # producer instances of each transactional id, in the order of transactional_ids (empty: producers_per_id
    # for every id); two instances of one id are a zombie pair
    instances_per_id: tuple[int, ...] = ()
    partitions: tuple[str, ...] = ("p0",)
    transactions_per_producer: int = 1
    records_per_transaction: int = 1
    commit_offsets: bool = False
    group_id: str = "g"
    transaction_version: int = 2
    partition_verification: bool = True  # transaction.partition.verification.enable (KIP-890 part 1)
    max_epoch: int = 32767
    max_sequence: int = 2147483647
    max_messages_in_flight: int = 4  # the network's size below which a message may be duplicated
    max_in_flight: int = 1  # batches in flight per partition (max.in.flight.requests.per.connection)
    # the producers' applications are the members of a classic consumer group, generation 1 at the start, and
    # commit offsets naming their member (KIP-447); the fault "rebalance" evicts the first producer's member
    group_members: bool = False
    # partitions of __transaction_state (transaction.state.log.num.partitions); an id lives in abs(hashCode) % n
    txn_log_partitions: int = 1
    # the group's protocol (group.protocol): "classic" (JoinGroup/SyncGroup, generations, KIP-447) or "consumer"
    # (KIP-848: ConsumerGroupHeartbeat, member epochs; producer i's consumer owns input-i). Under "consumer" the
    # fault "rebalance" fences the first producer's member: its session times out (it is removed) or the
    # target moves its partition to the next member (its epoch is bumped once the partition is released)
    group_protocol: str = "classic"
    # KIP-939: the producers enable two-phase commit (transaction.two.phase.commit.enable on client and broker);
    # an external coordinator prepares each transaction, records its decision durably and completes it, and an
    # instance restarted after a crash initialises with keepPreparedTxn
    two_phase_commit: bool = False
    faults: dict[str, int] = field(default_factory=dict)  # fault -> how many times it may happen
    expected_states: int | None = None

    def __post_init__(self) -> None:
        problems = []
        if not self.transactional_ids:
            problems.append("at least one transactional id is needed")
        if not self.partitions:
            problems.append("at least one partition is needed")
        if self.producers_per_id < 1:
            problems.append("producers_per_id must be >= 1")
        if self.instances_per_id and (len(self.instances_per_id) != len(self.transactional_ids)
                                      or min(self.instances_per_id) < 1):
            problems.append(f"instances_per_id {self.instances_per_id} needs one count >= 1 for each of the "
                            f"{len(self.transactional_ids)} transactional ids")
        if self.transaction_version not in (0, 1, 2):
            problems.append(f"transaction_version must be 0, 1 or 2, not {self.transaction_version}")
        if self.txn_log_partitions < 1:
            problems.append(f"txn_log_partitions must be >= 1, not {self.txn_log_partitions}")
        if self.max_epoch < 2:
            problems.append("max_epoch must be >= 2")
        if self.max_sequence < 1:
            problems.append("max_sequence must be >= 1")
        if not 1 <= self.max_in_flight <= MAX_IN_FLIGHT:
            problems.append(f"max_in_flight must be 1 to {MAX_IN_FLIGHT} (Kafka's idempotent producer), "
                            f"not {self.max_in_flight}")
        elif self.max_sequence < 2 * (self.max_in_flight - 1):
            problems.append(f"max_in_flight {self.max_in_flight} needs max_sequence >= {2 * (self.max_in_flight - 1)} "
                            "(so that the order of the sequences in flight is clear across the wrap to 0)")
        for fault, budget in self.faults.items():
            if fault not in FAULTS:
                problems.append(f"unknown fault {fault!r} (known: {', '.join(FAULTS)})")
            elif budget < 0:
                problems.append(f"fault budget for {fault!r} must be >= 0")
        if self.records_per_transaction < 0 or (self.records_per_transaction == 0 and not self.commit_offsets):
            problems.append("records_per_transaction must be >= 1, or 0 when the transactions commit offsets")
        if self.group_members and not self.commit_offsets:
            problems.append("group_members needs commit_offsets")
        if self.group_protocol not in GROUP_PROTOCOLS:
            problems.append(f"group_protocol must be one of {', '.join(GROUP_PROTOCOLS)}, not {self.group_protocol!r}")
        elif self.group_protocol == "consumer" and not self.group_members:
            problems.append("group_protocol 'consumer' needs group_members")
        if self.budget("rebalance") and not self.group_members:
            problems.append("the fault 'rebalance' needs group_members")
        if self.budget("plain_commit") and (not self.commit_offsets or self.group_members):
            problems.append("the fault 'plain_commit' needs commit_offsets and no group_members (an admin's commit "
                            "from outside group management)")
        if self.two_phase_commit and (self.commit_offsets or self.has_zombies or self.transactions_per_producer != 1):
            problems.append("two_phase_commit is modelled for one transaction per producer instance, without "
                            "offsets or zombies")
        if problems:
            raise ValueError(f"scenario {self.name!r}: " + "; ".join(problems))

    @property
    def initial_generation(self) -> int:
        """The consumer group's generation at the start: 1 with group members, else the group is Empty (0)."""
        return 1 if self.group_members else 0

    @property
    def producer_transactional_ids(self) -> tuple[str, ...]:
        """The transactional id of each producer instance, in the order of their indexes."""
        counts = self.instances_per_id or (self.producers_per_id,) * len(self.transactional_ids)
        return tuple(tid for tid, n in zip(self.transactional_ids, counts, strict=True) for _ in range(n))

    @property
    def has_zombies(self) -> bool:
        """Some transactional id has more than one producer instance."""
        ids = self.producer_transactional_ids
        return len(set(ids)) < len(ids)

    def budget(self, fault: str) -> int:
        return self.faults.get(fault, 0)

    def with_(self, **changes: object) -> Scenario:
        return replace(self, **changes)  # type: ignore[arg-type]


SCENARIOS: dict[str, Scenario] = {}


def scenario(s: Scenario) -> Scenario:
    SCENARIOS[s.name] = s
    return s


TINY = scenario(Scenario(
    "tiny", "one producer, one partition, one transaction; no faults: the happy path, explored in well under a second",
    max_epoch=4, max_sequence=3))

DEFAULT = scenario(Scenario(
    "default", "one producer, two partitions, two transactions with consumer offsets (consume-transform-"
    "produce); a duplicated request and a transaction timeout",
    partitions=("p0", "p1"), transactions_per_producer=2, commit_offsets=True, max_epoch=6, max_sequence=7,
    faults={"duplicate": 1, "timeout": 1}, expected_states=200_342))

ZOMBIE = scenario(Scenario(
    "zombie", "two producer instances sharing one transactional id (a zombie), one partition",
    producers_per_id=2, max_epoch=6, max_sequence=3))

DELAYED_PRODUCE = scenario(Scenario(
    "delayed-produce", "one producer, two transactions on one partition; a produce may be delayed past the "
    "end of its transaction, a transaction may time out",
    transactions_per_producer=2, max_epoch=6, max_sequence=3, faults={"timeout": 1, "expire_batch": 1}))

DELAYED_END_TXN = scenario(Scenario(
    "delayed-end-txn", "one producer, two transactions on one partition; an EndTxn may be duplicated and "
    "delivered late",
    transactions_per_producer=2, max_epoch=6, max_sequence=3, faults={"duplicate": 1}))

FAILOVER = scenario(Scenario(
    "failover", "one producer, two partitions, one transaction; the coordinator may fail over once",
    partitions=("p0", "p1"), max_epoch=4, max_sequence=3, faults={"failover": 1}))

RETRY = scenario(Scenario(
    "retry", "one producer, one partition, two records; a produce may be duplicated (a client retry)",
    records_per_transaction=2, max_epoch=4, max_sequence=3, faults={"duplicate": 1}))

MULTI_PARTITION = scenario(Scenario(
    "multi-partition", "one producer, one transaction writing to two partitions",
    partitions=("p0", "p1"), records_per_transaction=2, max_epoch=4, max_sequence=3))

OFFSETS = scenario(Scenario(
    "offsets", "consume-transform-produce: one transaction with output and consumer offsets",
    commit_offsets=True, max_epoch=4, max_sequence=3))

EPOCH_EXHAUSTION = scenario(Scenario(
    "epoch-exhaustion", "one producer, three transactions with a tiny epoch bound: producer-id rotation",
    transactions_per_producer=3, max_epoch=3, max_sequence=3))

LARGE = scenario(Scenario(
    "large", "the default scenario with a coordinator failover as well (for benchmarks)",
    partitions=("p0", "p1"), transactions_per_producer=2, commit_offsets=True, max_epoch=6, max_sequence=7,
    faults={"duplicate": 1, "timeout": 1, "failover": 1}))

# the three faults no scenario above budgets (issue 20): each alone, then all three together
LOSS = scenario(Scenario(
    "loss", "consume-transform-produce on two partitions; two requests or responses may be lost (the client "
    "re-sends after its request timeout, the coordinator re-sends a marker)",
    partitions=("p0", "p1"), commit_offsets=True, max_epoch=4, max_sequence=3, faults={"loss": 2}))

APPEND_FAILURE = scenario(Scenario(
    "append-failure", "consume-transform-produce, two transactions on two partitions; one transaction-log "
    "append of the coordinator may fail (NOT_ENOUGH_REPLICAS, answered as COORDINATOR_NOT_AVAILABLE)",
    partitions=("p0", "p1"), transactions_per_producer=2, commit_offsets=True, max_epoch=6, max_sequence=3,
    faults={"append_failure": 1}))

CRASH = scenario(Scenario(
    "crash", "one producer, two transactions on two partitions; the producer may crash and a new instance with "
    "the same transactional id start",
    partitions=("p0", "p1"), transactions_per_producer=2, max_epoch=6, max_sequence=3, faults={"crash": 1}))

FAULTS_COMBINED = scenario(Scenario(
    "faults", "one producer, two transactions on one partition; a loss, a failed transaction-log append and a "
    "producer crash, in any order",
    transactions_per_producer=2, max_epoch=6, max_sequence=3,
    faults={"loss": 1, "append_failure": 1, "crash": 1}))

ADMIN_ABORT = scenario(Scenario(
    "admin-abort", "one producer, two transactions on one partition; the producer may crash, leaving its "
    "transaction open, and an admin abort it at the partition (kafka-transactions.sh abort: WriteTxnMarkers from "
    "the admin, the coordinator not consulted) before the coordinator or a new instance does",
    transactions_per_producer=2, max_epoch=6, max_sequence=3, faults={"crash": 1, "admin_abort": 1},
    expected_states=2_401))


REBALANCE = scenario(Scenario(
    "rebalance", "KIP-447: two consume-transform-produce instances in one consumer group, one transaction each "
    "committing its input position (no output records: the fence is on the offsets); a rebalance may evict the "
    "first one's member while its transaction is open, a zombie from then on",
    transactional_ids=("t1", "t2"), records_per_transaction=0, commit_offsets=True, group_members=True,
    max_epoch=4, max_sequence=3, faults={"rebalance": 1}))


CONSUMER_REBALANCE = scenario(Scenario(
    "consumer-rebalance", "KIP-848: the rebalance scenario under the consumer group protocol: two instances, "
    "members of a consumer group at epoch 1, each owning its input partition and committing its position in one "
    "transaction; the first one's member may be fenced while its transaction is open (its session times out, "
    "or the target moves its partition to the other member), and the other member's heartbeat then takes the "
    "partition at the next epoch",
    transactional_ids=("t1", "t2"), records_per_transaction=0, commit_offsets=True, group_members=True,
    group_protocol="consumer", max_epoch=4, max_sequence=3, faults={"rebalance": 1}))


# issue 31: the paths the behaviour cases alone covered, model-checked. Time is abstract: an expiry may come
# whenever Kafka's timers allow it (faults.expiry_steps says which guard stands for which timer)
PRODUCER_EXPIRY = scenario(Scenario(
    "producer-expiry", "one producer, two transactions on one partition; the partition may expire the producer's id "
    "(and its verification entries) once the producer is idle there, and a produce may be duplicated",
    transactions_per_producer=2, max_epoch=4, max_sequence=3, faults={"expire_producer": 1, "duplicate": 1}))

ID_EXPIRY = scenario(Scenario(
    "id-expiry", "one producer, two transactions on one partition; the coordinator may expire the transactional id "
    "once no transaction is open, and the producer may crash and restart (initialising the id again)",
    transactions_per_producer=2, max_epoch=4, max_sequence=3, faults={"expire_transactional_id": 1, "crash": 1}))

PLAIN_COMMIT = scenario(Scenario(
    "plain-commit", "consume-transform-produce, one transaction with output and consumer offsets; an admin may "
    "commit the group's input offset with a plain OffsetCommit at any time (KIP-447: the newer of a plain and a "
    "transactional commit wins when the marker lands)",
    commit_offsets=True, max_epoch=4, max_sequence=3, faults={"plain_commit": 1}))

FAILOVER_TWICE = scenario(Scenario(
    "failover-twice", "one producer, two transactions on one partition; the coordinator may fail over twice (a second "
    "new coordinator loads what the first one wrote, markers of two older coordinator epochs in flight)",
    transactions_per_producer=2, max_epoch=4, max_sequence=3, faults={"failover": 2}, expected_states=5_018))

TXN_LOG_LOADING = scenario(Scenario(
    "txn-log-loading", "one producer, two transactions on one partition; __transaction_state has two partitions (t1 "
    "lives in the second) and the coordinator may fail over slowly: it resigns both (NOT_COORDINATOR), a new one is "
    "elected and loads them (COORDINATOR_LOAD_IN_PROGRESS), each partition's load finishing on its own",
    transactions_per_producer=2, txn_log_partitions=2, max_epoch=4, max_sequence=3, faults={"slow_failover": 1},
    expected_states=2_873))


# KIP-939 (docs/kip-939.md): the external coordinator's prepare, decision and completeTransaction; a
# transaction timeout may come (the coordinator must pass 2PC transactions over), a message may be lost. Not a
# duplicate: a late copy of InitProducerId (without keepPreparedTxn) aborts the prepared transaction, in 4.4 and
# in the KIP's design alike (tests/spec/test_two_phase.py pins it)
TWO_PHASE_COMMIT = scenario(Scenario(
    "two-phase-commit", "KIP-939: one producer with two-phase commit; the external coordinator prepares the "
    "transaction, decides commit or abort and completes it with the prepared state it recorded; a transaction "
    "timeout and the loss of a message may come",
    two_phase_commit=True, max_epoch=4, max_sequence=3, faults={"timeout": 1, "loss": 1}))

TWO_PHASE_RECOVERY = scenario(Scenario(
    "two-phase-recovery", "KIP-939: two-phase commit whose producer may crash at any point; the restarted "
    "instance initialises with keepPreparedTxn and completes the kept transaction as the external coordinator "
    "decided (presumed abort without a recorded decision). Kafka 4.4 answers keepPreparedTxn with "
    "UNSUPPORTED_VERSION: check it with --variant kip-939-keep-prepared for the KIP's design",
    two_phase_commit=True, records_per_transaction=2, max_epoch=4, max_sequence=3, faults={"crash": 1, "timeout": 1}))


IN_FLIGHT_2 = scenario(Scenario(
    "in-flight-2", "one producer, one partition, three records with two batches in flight; a message may be "
    "duplicated: batches answered out of order are retried in sequence order",
    records_per_transaction=3, max_in_flight=2, max_epoch=4, max_sequence=3, faults={"duplicate": 1},
    expected_states=3_684))

IN_FLIGHT_5 = scenario(Scenario(
    "in-flight-5", "one producer, one partition, five records with five batches in flight (Kafka's default); "
    "a message may be duplicated: the broker's five-batch duplicate window",
    records_per_transaction=5, max_in_flight=5, max_epoch=4, max_sequence=8, faults={"duplicate": 1},
    expected_states=97_978))

FULL = scenario(Scenario(
    "full", "the combination bugs live in: two transactional ids, the first with a zombie instance, two partitions, "
    "two consume-transform-produce transactions per instance committing consumer offsets as members of a consumer "
    "group; a duplicated message, a transaction timeout, a coordinator failover and a rebalance that evicts the "
    "first instance's member (far beyond an exhaustive search: for simulation, --simulate, and bounded search, "
    "--max-depth)",
    transactional_ids=("t1", "t2"), instances_per_id=(2, 1), partitions=("p0", "p1"), transactions_per_producer=2,
    commit_offsets=True, group_members=True, max_epoch=4, max_sequence=3,
    faults={"duplicate": 1, "timeout": 1, "failover": 1, "rebalance": 1}))


def scenario_named(name: str) -> Scenario:
    try:
        return SCENARIOS[name]
    except KeyError:
        raise KeyError(f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}") from None
