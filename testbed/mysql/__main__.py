"""``python -m testbed.mysql COMMAND``: see :mod:`testbed.mysql.cli`."""

from __future__ import annotations

import sys

from testbed.mysql.cli import main

sys.exit(main())
