"""Case targets: adapters that run ``txn-case/1`` steps on the spec's or the implementation's components."""
