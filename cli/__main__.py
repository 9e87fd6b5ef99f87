"""``python -m txnspec.cli``: the ``txnspec`` command."""

import sys

from txnspec.cli import main

sys.exit(main())
