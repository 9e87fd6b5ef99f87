"""Replay adapters: the spec's own (:mod:`.spec_adapter`) and, later, the implementation's.

An adapter drives one system under test through a trace; the contract is
:class:`txnspec.conformance.replay.Adapter`.
"""
