"""The deterministic simulation (issue 45, ``make sim``): the connector's real code against a simulated world.

The world is a simulated Accumulo in memory (:mod:`.accumulo`: tables, tablets, versions and delete markers,
minor, partial and full compactions, iterators in priority order, conditional mutations, bulk import, table
properties), served by a simulated gateway (:mod:`.gateway`, a handler of the proxy's Thrift service) to real
``connector.accumulo.Connection`` objects whose sockets are in memory (:mod:`.transport`): everything from the
connector's public API down to its hand-encoded frames and its Rust decoders runs unchanged. Nothing in the world
has a thread or a wall clock of its own, so a seed replays a run exactly.

The scheduler (:mod:`.scheduler`) interleaves the simulated processes at every client call and injects crashes
and lost answers; the workload (:mod:`.workload`) runs the connector's processes; the oracle (:mod:`.oracle`)
checks each quiescent point; the shrinker (:mod:`.shrink`) cuts a failing schedule down.

The simulated Accumulo is the one fake the project allows as evidence, and only because
``tests/test_sim_differential.py`` holds it to the real one: the same random sequences of writes, deletes,
flushes, compactions, iterator settings, scans and conditional mutations run on an embedded Accumulo and on the
simulation, and every scan's full result must agree. What that test cannot force on a real cluster (a partial
major compaction, say) it says so.
"""
