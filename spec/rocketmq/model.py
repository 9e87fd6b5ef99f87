"""The RocketMQ spec's scenarios, variants and model, for ``txnspec check`` and ``txnspec compare``.

Scenario names carry the ``rocketmq-`` prefix (see :mod:`txnspec.spec.catalog`). ``current`` is RocketMQ
5.3.3 with an application whose check listener agrees with its local transaction; the
``inconsistent-listener`` variant is the application of issue #8158, whose check answers before the
local transaction decided.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from txnspec.checker.model import Model
from txnspec.spec.environment import fairness_by_kind, named
from txnspec.spec.guarantees import GuaranteeCheck, GuaranteeRow, NotApplicable
from txnspec.spec.rocketmq import properties as props
from txnspec.spec.rocketmq import system as sysm


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    transactions: int = 1
    check_max: int = 2
    faults: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unknown = set(self.faults) - set(sysm.FAULTS)
        if unknown or self.transactions < 1 or self.check_max < 1:
            raise ValueError(f"bad RocketMQ scenario {self.name!r}: faults {sorted(unknown)} unknown "
                             f"(known: {', '.join(sysm.FAULTS)}), transactions and check_max must be >= 1")


@dataclass(frozen=True)
class Variant:
    name: str
    description: str
    reference: str
    consistent_listener: bool = True
    expected_violation: str | None = None


SCENARIOS: dict[str, Scenario] = {s.name: s for s in (
    Scenario("rocketmq-default", "one transactional message; an END or CHECK may be lost or duplicated once",
             faults={"loss": 1, "duplicate": 1}),
    Scenario("rocketmq-happy", "one transactional message, no faults: the check loop races the END",
             check_max=1),
    Scenario("rocketmq-two", "two transactional messages, no faults", transactions=2, check_max=1),
    Scenario("rocketmq-crash", "one transactional message; the broker may crash once, losing op records "
             "still in memory", faults={"crash": 1}),
    Scenario("rocketmq-half-retry", "one transactional message whose half send is retried once (the first "
             "half's reply was lost): an orphan half", check_max=1, faults={"half_retry": 1}),
)}

VARIANTS: dict[str, Variant] = {v.name: v for v in (
    Variant("current", "RocketMQ 5.3.3 with a check listener that agrees with the local transaction",
            "apache/rocketmq 5.3.3, TransactionalMessageServiceImpl"),
    Variant("inconsistent-listener", "the check listener answers COMMIT or ROLLBACK before the local "
            "transaction decided", "apache/rocketmq#8158", consistent_listener=False,
            expected_violation="no_commit_and_rollback"),
)}


def config(scenario: str, variant: str = "current") -> sysm.RocketConfig:
    s, v = SCENARIOS[scenario], VARIANTS[variant]
    return sysm.RocketConfig(s.transactions, s.check_max, tuple(sorted(s.faults.items())), v.consistent_listener)


fairness = fairness_by_kind(sysm.FAIR_KINDS)


def build_model(scenario: str, variant: str = "current") -> Model[sysm.RocketState]:
    named(SCENARIOS, scenario, "scenario")
    named(VARIANTS, variant, "variant")
    c = config(scenario, variant)
    return Model(
        name=f"rocketmq-transactional-messages[scenario={scenario}, variant={variant}]",
        init_states=lambda: (sysm.initial_state(c),),
        next_steps=lambda state: sysm.next_steps(c, state),
        properties=props.properties(c.check_max),
        is_final=sysm.is_final,
        fairness=fairness,
        describe_state=sysm.describe_state,
        metadata={"action_kinds": sysm.ACTION_KINDS, "config": c},
    )


GUARANTEES: tuple[GuaranteeRow, ...] = (
    NotApplicable("atomic_visibility", "a RocketMQ transaction is one message (TransactionImpl.MAX_MESSAGE_NUM "
                  "= 1; one message per sendMessageInTransaction): nothing spans queues"),
    GuaranteeCheck("no_duplicate_committed", "rocketmq-happy", ("at_most_one_committed_copy",), "violated",
                   reference="apache/rocketmq#8158 (1), #7933: the END and a check reply both commit",
                   note="no fault needed: the check loop only races the one-way END"),
    GuaranteeCheck("no_visible_aborted", "rocketmq-default", ("rolled_back_never_visible",), "holds",
                   reference="EndTransactionProcessor: ROLLBACK puts no real message"),
    GuaranteeCheck("idempotent_commit", "rocketmq-default", ("at_most_one_committed_copy",), "violated",
                   reference="apache/rocketmq#5574: a duplicated COMMIT is stored in the real topic twice"),
    NotApplicable("zombie_fencing", "RocketMQ has no producer epochs: a check goes to any live producer of the "
                  "group, and an END from any of them is accepted"),
    NotApplicable("ack_offset_atomicity", "consumer offsets are not part of a RocketMQ transaction"),
    GuaranteeCheck("decision_never_reversed", "rocketmq-default", ("no_commit_and_rollback",), "holds",
                   reference="holds only while the check listener agrees with the local transaction; the "
                             "inconsistent-listener variant breaks it (apache/rocketmq#8158 (2))"),
    GuaranteeCheck("client_outcome_agrees", "rocketmq-happy", ("committed_eventually_visible",), "violated",
                   reference="a local transaction that answered UNKNOW and commits after transactionCheckMax "
                             "checks is discarded (RULES §1.10)"),
    GuaranteeCheck("bounded_resolution", "rocketmq-default", ("every_half_resolved_or_discarded",), "holds",
                   reference="the check loop discards a half after transactionCheckMax checks"),
    GuaranteeCheck("progress_after_crash", "rocketmq-crash", ("every_half_resolved_or_discarded",), "holds",
                   reference="a half whose op record was lost is checked again (and may commit twice)"),
)
