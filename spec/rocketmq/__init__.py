"""RocketMQ transactional messages (half messages, end-transaction, check-back): the spec."""
