"""``python -m connector``: the ``accumulo-export`` command. Also the CLI as a file for ``spark-submit``,
which takes a path, not a module:

    spark-submit [spark options] $(python -c 'import connector.__main__ as m; print(m.__file__)') drain ...
"""

from __future__ import annotations

import os
import sys

# run as a script, Python puts this folder first on sys.path, where its modules would shadow top-level ones
if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]

from connector.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
