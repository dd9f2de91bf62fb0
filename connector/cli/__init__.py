"""The ``accumulo-export`` command. It only wires the layers together; see ``--help`` of each command.

Modules: ``main`` (the parser, ``main()``), one per command: ``queue``, ``drain`` (with ``drain_stream``,
supervising a stream), ``combine``, ``tx``, ``bootstrap`` (with ``verify``), ``wait``, ``purge``
(``purge-tombstones``); ``every`` (a command run again and again: ``verify --every``), ``progress`` (what runs show: the
drain's and the combine's progress reports), ``metrics`` (the ``--metrics-port`` endpoint), ``verify_metrics``
(what a standing verify publishes), ``options`` (shared option types and checks), ``engine`` (``--engine``,
``--master``, ``--metrics-port``: the engine choice every command shares), ``common`` (usage errors and failed
runs, the one table of exit statuses, SIGTERM, Spark's output).
"""

from .main import main, parser

__all__ = ["main", "parser"]
