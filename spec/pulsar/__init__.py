"""Pulsar transactions (coordinator, transaction buffer, pending acks): the spec."""
