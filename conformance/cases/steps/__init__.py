"""The case format per component, in FORMAT.md's order: coordinator, partition, client, group."""
