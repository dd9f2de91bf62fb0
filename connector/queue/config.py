"""The configuration of one export queue: where it lives, how many buckets, how keys and values are encoded.

Plain strings and ints only, so a config pickles cheaply to Spark executors and round-trips through options.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field
from functools import cached_property

from connector.serializers import Serializer, serializer_from_name
from connector.settings import Settings, integer, setting

from .errors import QueueConfigError
from .layout import QueueLayout

TARGET_TABLETS = 16  # default split: at most this many bucket tablets, at least half of it when buckets allow


def default_buckets_per_tablet(num_buckets: int) -> int:
    """Buckets per tablet giving about 8-16 tablets (fewer only when there are fewer than 8 buckets)."""
    return max(1, -(-num_buckets // TARGET_TABLETS))


@dataclass(frozen=True)
class QueueConfig(Settings):
    """One export queue.

    ``table``: the Accumulo table holding the queue (it may hold other queues and data too);
    ``qid``: the queue id, the prefix of its rows (no ':' or '#'); ``num_buckets``: how many buckets entries are
    spread over (the unit of parallel draining); ``buckets_per_tablet``: buckets sharing one tablet (None:
    chosen for about 8-16 tablets); ``key_serializer``/``value_serializer``: serializer names, see
    :func:`serializer_from_name`.
    """

    table: str = setting(MISSING, "the table holding the queue", flag=None)
    qid: str = setting(MISSING, "the queue id (the prefix of its rows)", flag=None, option="id")
    num_buckets: int = setting(MISSING, "the queue's bucket count", parse=integer(1), flag=None, option="buckets")
    buckets_per_tablet: int | None = setting(None, "buckets sharing one tablet", parse=integer(1), flag=None,
                                             option=None)
    key_serializer: str = setting("json", "how keys are serialized: json, bytes or module:callable", flag=None)
    value_serializer: str = setting("json", "how values are serialized: json, packed (the built-in translators' "
                                    "inputs, compact), bytes or module:callable", flag=None)
    _resolved_bpt: int = field(init=False, repr=False, compare=False, default=0)

    #: what a value its declaration refuses raises
    invalid = QueueConfigError

    def __post_init__(self) -> None:
        super().__post_init__()  # each setting by its declaration
        layout = QueueLayout(self.qid, self.num_buckets)  # validates qid and num_buckets
        if self.key_serializer.strip() == "packed":
            raise QueueConfigError("key_serializer 'packed' encodes export values (cells), not keys: use json or bytes")
        bpt = self.buckets_per_tablet or default_buckets_per_tablet(self.num_buckets)
        object.__setattr__(self, "_resolved_bpt", bpt)
        self.__dict__["layout"] = layout  # prime the cached property

    @cached_property
    def layout(self) -> QueueLayout:
        """The row layout of this queue."""
        return QueueLayout(self.qid, self.num_buckets)

    @property
    def tablet_buckets(self) -> int:
        """Buckets per tablet in effect (``buckets_per_tablet``, or the default chosen for it)."""
        return self._resolved_bpt

    def split_points(self) -> list[bytes]:
        """The table splits for this queue (see :meth:`QueueLayout.split_points`)."""
        return self.layout.split_points(self.tablet_buckets)

    def serializers(self) -> tuple[Serializer, Serializer]:
        """The key and value serializers, freshly resolved from their names."""
        return serializer_from_name(self.key_serializer), serializer_from_name(self.value_serializer)


#: the prefix of a queue's data source options
OPTION_PREFIX = "queue."


def queue_options(config: QueueConfig) -> dict[str, str]:
    """The queue as data source options (``queue.table``, ``queue.id``, ``queue.buckets``, serializers)."""
    return config.to_options(OPTION_PREFIX)
