"""``python -m connector.cli``: the ``accumulo-export`` command."""

import sys

from .main import main

sys.exit(main())
