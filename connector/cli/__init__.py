"""The ``accumulo-export`` command. It only wires the layers together; see ``--help`` of each command.

Modules: ``common`` (usage errors, exit statuses, SIGTERM, argument types, Spark's output), ``main`` (the
parser, ``queue``, ``drain`` and ``tx`` commands, ``main()``), ``combine`` (the ``combine`` commands).
"""

from .main import main, parser

__all__ = ["main", "parser"]
