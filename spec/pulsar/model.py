"""The Pulsar spec's scenarios, variants and model, for ``txnspec check`` and ``txnspec compare``.

Scenario names carry the ``pulsar-`` prefix (see :mod:`txnspec.spec.catalog`). ``current`` is Pulsar
3.x/4.x with its default broker configuration (``brokerDeduplicationEnabled=false``); ``dedup`` turns
message deduplication on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from txnspec.checker.model import Model
from txnspec.spec.environment import fairness_by_kind, named
from txnspec.spec.guarantees import GuaranteeCheck, GuaranteeRow, NotApplicable
from txnspec.spec.pulsar import properties as props
from txnspec.spec.pulsar import system as sysm


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    clients: int = 1
    partitions: tuple[str, ...] = ("p0",)
    ack_input: bool = False
    faults: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unknown = set(self.faults) - set(sysm.FAULTS)
        if unknown or self.clients < 1 or not self.partitions:
            raise ValueError(f"bad Pulsar scenario {self.name!r}: faults {sorted(unknown)} unknown "
                             f"(known: {', '.join(sysm.FAULTS)}); at least one client and one partition")


@dataclass(frozen=True)
class Variant:
    name: str
    description: str
    reference: str
    dedup: bool = False
    expected_violation: str | None = None


SCENARIOS: dict[str, Scenario] = {s.name: s for s in (
    Scenario("pulsar-happy", "one transaction: a send to each of two partitions and an ack of the input "
             "(consume-transform-produce); no faults", partitions=("p0", "p1"), ack_input=True),
    Scenario("pulsar-default", "one transaction on two partitions with an ack; a request may be duplicated once "
             "and an END answer lost once", partitions=("p0", "p1"), ack_input=True,
             faults={"duplicate": 1, "loss": 1}),
    Scenario("pulsar-two", "two transactions on one partition; a request may be duplicated once (a late send)",
             clients=2, faults={"duplicate": 1}),
    Scenario("pulsar-tc-crash", "one transaction on two partitions; the coordinator may crash and recover once",
             partitions=("p0", "p1"), faults={"tc_crash": 1}),
    Scenario("pulsar-client-timeout", "one transaction on one partition; the client's timer may fire",
             faults={"client_timeout": 1}),
)}

VARIANTS: dict[str, Variant] = {v.name: v for v in (
    Variant("current", "Pulsar 3.x/4.x, default configuration (brokerDeduplicationEnabled=false)",
            "apache/pulsar, TransactionMetadataStoreService, TopicTransactionBuffer"),
    Variant("dedup", "brokerDeduplicationEnabled=true: a retransmitted send is answered as a duplicate",
            "apache/pulsar MessageDeduplication", dedup=True),
)}


def config(scenario: str, variant: str = "current") -> sysm.PulsarConfig:
    s, v = SCENARIOS[scenario], VARIANTS[variant]
    return sysm.PulsarConfig(s.clients, s.partitions, s.ack_input, tuple(sorted(s.faults.items())), v.dedup)


fairness = fairness_by_kind(sysm.FAIR_KINDS)


def build_model(scenario: str, variant: str = "current") -> Model[sysm.PulsarState]:
    named(SCENARIOS, scenario, "scenario")
    named(VARIANTS, variant, "variant")
    c = config(scenario, variant)
    return Model(
        name=f"pulsar-transactions[scenario={scenario}, variant={variant}]",
        init_states=lambda: (sysm.initial_state(c),),
        next_steps=lambda state: sysm.next_steps(c, state),
        properties=props.properties(c.ack_input),
        is_final=sysm.is_final,
        fairness=fairness,
        describe_state=sysm.describe_state,
        metadata={"action_kinds": sysm.ACTION_KINDS, "config": c},
    )


GUARANTEES: tuple[GuaranteeRow, ...] = (
    GuaranteeCheck("atomic_visibility", "pulsar-two", ("decision_never_revoked",), "violated",
                   reference="RULES §2.9 item 4 [derived]: a late send of a committed transaction is aborted by "
                             "the next low watermark, and isTxnAborted ignores the position",
                   note="the committed transaction's delivered messages disappear from the partition"),
    GuaranteeCheck("no_duplicate_committed", "pulsar-default", ("no_duplicate_committed",), "violated",
                   reference="brokerDeduplicationEnabled is false by default; the dedup variant holds"),
    GuaranteeCheck("no_visible_aborted", "pulsar-default", ("delivered_only_if_committed",), "holds",
                   reference="filterEntriesForConsumer drops entries of aborted transactions, maxReadPosition "
                             "hides open ones"),
    GuaranteeCheck("idempotent_commit", "pulsar-default", ("end_txn_answers_its_outcome",), "violated",
                   reference="apache/pulsar#19629, PIP-254: a retried commit finds the transaction forgotten"),
    NotApplicable("zombie_fencing", "Pulsar has no transactional identity across producer instances: a TxnID is "
                  "used once, and late sends are refused by the low watermark only (PIP-163)"),
    GuaranteeCheck("ack_offset_atomicity", "pulsar-default", ("acks_only_with_commit",), "holds",
                   reference="PendingAckHandleImpl: a transactional ack is applied to the cursor on commit only"),
    GuaranteeCheck("decision_never_reversed", "pulsar-two", ("decision_never_revoked",), "violated",
                   reference="RULES §2.9 item 4 [derived]: commit marker and aborted set for one transaction"),
    GuaranteeCheck("client_outcome_agrees", "pulsar-default", ("client_error_only_if_not_committed",), "violated",
                   reference="apache/pulsar#19629: the client goes to ERROR although the coordinator committed"),
    GuaranteeCheck("bounded_resolution", "pulsar-default", ("open_transactions_end", "ending_transactions_complete"),
                   "holds", reference="TransactionTimeoutTrackerImpl aborts OPEN transactions; ends are retried"),
    GuaranteeCheck("progress_after_crash", "pulsar-tc-crash",
                   ("open_transactions_end", "ending_transactions_complete"), "holds",
                   reference="recovery replays the log and handleCommittingAndAbortingTransaction ends them again"),
)
