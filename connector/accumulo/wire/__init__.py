"""The client's wire codecs: how its calls become bytes and replies become cells, apart from the client's
own classes (``Connection``, ``BatchWriter``, the scanner functions, ``ConditionalWriter``), which use them.

- :mod:`.native`: the Rust codec (``connector._native``) with the client's types and errors. The one
  encoder of ``update`` calls (an Arrow batch of cells, or the ``ColumnUpdate`` lists of mutations) and
  the one decoder of ``nextK`` replies.
- :mod:`.frames`: Thrift frame limits, and how large a mutation is on the wire (the frame rule).
- :mod:`.batches`: an Arrow batch of cell changes (``BatchWriter.add_cells``), checked and cut into
  ``update`` frames.
- :mod:`.next_k`: the raw ``nextK`` call on a client's socket; its reply decoded natively, or by thriftpy2
  when it carries an error.
- :mod:`.conditional`: the ``updateRowsConditionally`` call encoded directly (its updates by the Rust
  encoder); no other implementation.
- :mod:`.scanners`: the ``createScanner`` and ``createBatchScanner`` calls encoded directly (every read begins
  with one).
- :mod:`.structs`: mutations as thriftpy2 structs, for the generic calls (``updateAndFlush``, conditional
  writes with iterators).
- :mod:`.compact`: the few Thrift compact-protocol primitives the hand-encoded calls above write.

Python twins of the Rust codec live only under ``tests/`` as oracles (``tests/wire_oracle.py``,
``tests/next_k_oracle.py``), which check it byte for byte. Applications use ``connector.accumulo``.
"""
