"""The fixtures users import (``txnspec.serve.testing``), used here as a user would."""

from txnspec.serve.testing import kafka_bootstrap, kafka_bootstrap_tv1, txnspec_server  # noqa: F401
