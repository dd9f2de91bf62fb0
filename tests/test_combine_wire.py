"""The hand-written ``updateRowsConditionally`` encoder must produce exactly the bytes thriftpy2 does."""

from hypothesis import given, settings
from hypothesis import strategies as st
from thriftpy2.protocol import TCompactProtocol
from thriftpy2.thrift import TMessageType
from thriftpy2.transport import TMemoryBuffer

from connector.accumulo import Condition, ConditionalMutation
from connector.accumulo._idl import MAX_TIMESTAMP, proxy
from connector.accumulo.wire.conditional import encode_conditional_call
from connector.accumulo.wire.structs import column_update_to_thrift


def thriftpy2_bytes(writer_id: str, mutations: list[ConditionalMutation]) -> bytes:
    buf = TMemoryBuffer()
    proto = TCompactProtocol(buf)
    proto.write_message_begin("updateRowsConditionally", TMessageType.CALL, 0)
    updates = {m.row: proxy.ConditionalUpdates(conditions=[c.to_thrift() for c in m.conditions],
                                               updates=[column_update_to_thrift(u) for u in m.updates])
               for m in mutations}
    proto.write_struct(proxy.AccumuloProxy.updateRowsConditionally_args(conditionalWriter=writer_id, updates=updates))
    proto.write_message_end()
    return buf.getvalue()


small = st.binary(max_size=200)
condition = st.builds(Condition, cf=small, cq=small, value=st.one_of(st.none(), small),
                      visibility=st.sampled_from([b"", b"a&b"]),
                      timestamp=st.one_of(st.none(), st.integers(0, MAX_TIMESTAMP)))


@st.composite
def mutation(draw):
    m = ConditionalMutation(draw(st.binary(min_size=1, max_size=150)), draw(st.lists(condition, min_size=1,
                                                                                     max_size=20)))
    for _ in range(draw(st.integers(0, 20))):
        cq, ts = draw(small), draw(st.one_of(st.none(), st.integers(0, MAX_TIMESTAMP)))
        if draw(st.booleans()):
            m.delete(b"u", cq, timestamp=ts)
        else:
            m.put(b"s", cq, draw(small), timestamp=ts)
    return m


@settings(max_examples=300, deadline=None)
@given(writer_id=st.text(max_size=40), mutations=st.lists(mutation(), min_size=1, max_size=8,
                                                          unique_by=lambda m: m.row))
def test_conditional_call_matches_thriftpy2(writer_id, mutations):
    assert encode_conditional_call(writer_id, mutations) == thriftpy2_bytes(writer_id, mutations)
