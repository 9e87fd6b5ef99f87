"""The case format per component, in FORMAT.md's order: coordinator, partition, client, group.

Each module holds, for its component, the typed ``given`` and ``when`` of ``txn-case/1``
(``conformance/data/FORMAT.md``) and the observation a target reports.

Both targets (the spec's and the implementation's, :mod:`txnspec.conformance.cases.targets`) read a case through
these values only, so the two cannot read it differently; a malformed value is a
:class:`~txnspec.conformance.cases.format.CaseInputError` naming the field.
"""
