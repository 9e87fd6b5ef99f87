"""The guarantees a transactional message queue may give, and how each system's spec judges them.

The comparison (``txnspec compare``, docs/comparison.md) is computed, not written by hand: for each
guarantee below, each system names the scenario, variant and properties whose model check decides it,
with the verdict expected from the system's source (``holds`` or ``violated``), or says why the
guarantee does not apply to it. Seed 004 compares the three designs in prose; this is that comparison
made checkable.

The vocabulary is deliberately coarse, one row per thing an application developer relies on; each
system's own properties (``spec/properties.py``, ``spec/rocketmq``, ``spec/pulsar``) are finer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Verdict = Literal["holds", "violated"]


@dataclass(frozen=True)
class Guarantee:
    key: str
    title: str
    description: str


GUARANTEES: tuple[Guarantee, ...] = (
    Guarantee("atomic_visibility", "atomic visibility across partitions",
              "a committed transaction's messages become readable on every partition or queue it wrote, "
              "and an aborted one's on none"),
    Guarantee("no_duplicate_committed", "no duplicate of a committed message",
              "a message the application sent once (the client may retry) is delivered to readers once"),
    Guarantee("no_visible_aborted", "no visible aborted message",
              "a reader never sees a message of a transaction that aborted (or was rolled back)"),
    Guarantee("idempotent_commit", "idempotent commit",
              "a retried or duplicated commit/end request does not apply a second time, nor to another "
              "transaction"),
    Guarantee("zombie_fencing", "zombie fencing",
              "an old instance of a producer that a new one replaced cannot commit or write into a commit"),
    Guarantee("ack_offset_atomicity", "ack/offset atomicity",
              "consumed positions (offsets, acks) are committed exactly when the transaction's output is"),
    Guarantee("decision_never_reversed", "decision never reversed",
              "once commit or abort is decided for a transaction, the other outcome never takes effect"),
    Guarantee("client_outcome_agrees", "the client's outcome agrees",
              "what the producer application is told (committed / aborted) is what happened"),
    Guarantee("bounded_resolution", "bounded resolution",
              "every transaction that was started is eventually resolved (committed or aborted), even if "
              "its producer goes away"),
    Guarantee("progress_after_crash", "progress after a coordinator or broker crash",
              "a transaction in flight when a coordinator or broker crashes is still resolved after recovery"),
)

GUARANTEE_KEYS = frozenset(g.key for g in GUARANTEES)


@dataclass(frozen=True)
class GuaranteeCheck:
    """A guarantee decided by model-checking ``properties`` on ``scenario`` under ``variant``.

    ``expected`` is the verdict the system's source leads us to expect; when it is ``violated``,
    ``reference`` names the upstream issue or source line the counterexample reproduces."""

    guarantee: str
    scenario: str
    properties: tuple[str, ...]
    expected: Verdict
    variant: str = "current"
    reference: str = ""
    note: str = ""

    def __post_init__(self) -> None:
        if self.guarantee not in GUARANTEE_KEYS:
            raise ValueError(f"unknown guarantee {self.guarantee!r}; known: {', '.join(sorted(GUARANTEE_KEYS))}")


@dataclass(frozen=True)
class NotApplicable:
    guarantee: str
    why: str

    def __post_init__(self) -> None:
        if self.guarantee not in GUARANTEE_KEYS:
            raise ValueError(f"unknown guarantee {self.guarantee!r}; known: {', '.join(sorted(GUARANTEE_KEYS))}")


GuaranteeRow = GuaranteeCheck | NotApplicable


KAFKA: tuple[GuaranteeRow, ...] = (
    GuaranteeCheck("atomic_visibility", "multi-partition", ("atomic_outcome", "read_committed_only_committed"),
                   "holds", reference="KIP-98: markers on every partition carry the coordinator's one decision"),
    GuaranteeCheck("no_duplicate_committed", "retry", ("no_duplicate_append",), "holds",
                   reference="ProducerStateManager: duplicates of the last 5 batches are answered, not appended"),
    GuaranteeCheck("no_visible_aborted", "default", ("read_committed_only_committed",), "holds",
                   reference="read_committed stops at the LSO and drops aborted ranges (aborted index)"),
    GuaranteeCheck("idempotent_commit", "delayed-end-txn", ("end_txn_applies_to_its_transaction",), "holds",
                   reference="KAFKA-17754 / KIP-890: a late EndTxn retry no longer ends the next transaction"),
    GuaranteeCheck("zombie_fencing", "zombie", ("fenced_producer_never_commits", "fenced_appends_never_commit"),
                   "holds", reference="KIP-98 epoch bump in InitProducerId fences the older instance"),
    GuaranteeCheck("ack_offset_atomicity", "offsets", ("offsets_only_with_committed_output",), "holds",
                   reference="KIP-447: TxnOffsetCommit stays pending until the group's marker"),
    GuaranteeCheck("decision_never_reversed", "default", ("atomic_outcome", "valid_coordinator_transitions"),
                   "holds", reference="TransactionMetadata: PrepareCommit only leads to CompleteCommit"),
    GuaranteeCheck("client_outcome_agrees", "default", ("committed_data_never_lost",), "holds",
                   reference="EndTxn answers after the PrepareCommit is in the transaction log"),
    GuaranteeCheck("bounded_resolution", "default", ("prepared_transactions_complete", "last_stable_offset_advances"),
                   "holds",
                   reference="transaction.timeout.ms aborts abandoned transactions; markers are retried"),
    GuaranteeCheck("progress_after_crash", "failover",
                   ("prepared_transactions_complete", "last_stable_offset_advances"), "holds",
                   reference="a new coordinator reloads the log and completes Prepare* transactions"),
)
