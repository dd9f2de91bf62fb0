"""The configuration of one export queue: where it lives, how many buckets, how keys and values are encoded.

Plain strings and ints only, so a config pickles cheaply to Spark executors and round-trips through options.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar, Self

from connector.serializers import DEFAULT_SERIALIZER, Serializer, serializer_from_name
from connector.settings import Settings, integer, setting

from .errors import QueueConfigError, QueueError
from .layout import MAX_BUCKETS, QueueLayout

TARGET_TABLETS = 16  # default split: at most this many bucket tablets, at least half of it when buckets allow


def default_buckets_per_tablet(num_buckets: int) -> int:
    """Buckets per tablet giving about 8-16 tablets (fewer only when there are fewer than 8 buckets)."""
    return max(1, -(-num_buckets // TARGET_TABLETS))


class QueueConfigBase(Settings):
    """What the configurations of an export queue (:class:`QueueConfig`) and of a combine queue
    (``connector.combine.CombineConfig``) share: a table, an id (``qid``, ``cid``: :attr:`ID_FIELD`), a bucket
    count, buckets per tablet and the key and value serializers, checked when made (a bad one raises the
    class's :attr:`ERROR`); the fields ``init`` stores (:meth:`stored_fields`) and the configuration made again
    from them (:meth:`from_stored`). Each subclass is a frozen dataclass declaring those fields (``QueueConfig`` as
    settings, for data source options)."""

    #: the name of the queue id's field
    ID_FIELD: ClassVar[str]
    #: what a bad configuration raises
    ERROR: ClassVar[type[QueueError]]

    if TYPE_CHECKING:  # the subclasses' dataclass fields
        table: str
        num_buckets: int
        buckets_per_tablet: int | None
        key_serializer: str
        value_serializer: str

        def __init__(self, **fields: Any) -> None: ...

        @property
        def layout(self) -> Any: ...

    def __post_init__(self) -> None:
        super().__post_init__()  # each declared setting by its declaration (QueueConfig's are declared)
        if not isinstance(self.table, str) or not self.table:
            raise self.ERROR("table must be a non-empty string")
        _ = self.layout  # its constructor checks the id and the bucket count
        bpt = self.buckets_per_tablet
        if bpt is None:
            bpt = default_buckets_per_tablet(self.num_buckets)
        elif not isinstance(bpt, int) or isinstance(bpt, bool) or bpt < 1:
            raise self.ERROR(f"buckets_per_tablet must be an int >= 1, got {bpt!r}")
        for what in ("key_serializer", "value_serializer"):
            name = getattr(self, what)
            if not isinstance(name, str) or not name.strip():
                raise self.ERROR(f"{what} must be a serializer name such as {DEFAULT_SERIALIZER!r}")
        self._check_serializers()
        object.__setattr__(self, "_tablet_buckets", bpt)  # derived, so not a field (nor compared)

    def _check_serializers(self) -> None:
        """Raise :attr:`ERROR` for serializers this kind of queue cannot use."""

    @property
    def queue_id(self) -> str:
        """The queue's id (its ``qid`` or ``cid``)."""
        return getattr(self, self.ID_FIELD)  # type: ignore[no-any-return]

    @property
    def tablet_buckets(self) -> int:
        """Buckets per tablet in effect (``buckets_per_tablet``, or the default chosen for it)."""
        return self.__dict__["_tablet_buckets"]  # type: ignore[no-any-return]

    def split_points(self) -> list[bytes]:
        """The table splits for this queue (see :meth:`QueueLayout.split_points`)."""
        return self.layout.split_points(self.tablet_buckets)  # type: ignore[no-any-return]

    def serializers(self) -> tuple[Serializer, Serializer]:
        """The key and value serializers, freshly resolved from their names."""
        return serializer_from_name(self.key_serializer), serializer_from_name(self.value_serializer)

    def stored_fields(self) -> dict[str, Any]:
        """What ``init`` stores in the queue's config row, and every user of the queue checks."""
        return {"num_buckets": self.num_buckets, "key_serializer": self.key_serializer,
                "value_serializer": self.value_serializer, "buckets_per_tablet": self.tablet_buckets}

    @classmethod
    def from_stored(cls, table: str, queue_id: str, stored: Mapping[str, Any]) -> Self:
        """The configuration of the queue ``queue_id`` in ``table`` from what ``init`` stored (a configuration
        stored before a field existed gets that field's default)."""
        return cls(table=table, **{cls.ID_FIELD: queue_id}, num_buckets=stored["num_buckets"],
                   buckets_per_tablet=stored.get("buckets_per_tablet"),
                   key_serializer=stored.get("key_serializer", DEFAULT_SERIALIZER),
                   value_serializer=stored.get("value_serializer", DEFAULT_SERIALIZER))


@dataclass(frozen=True)
class QueueConfig(QueueConfigBase):
    """One export queue.

    ``table``: the Accumulo table holding the queue (it may hold other queues and data too);
    ``qid``: the queue id, the prefix of its rows (no ':' or '#'); ``num_buckets``: how many buckets entries are
    spread over (the unit of parallel draining); ``buckets_per_tablet``: buckets sharing one tablet (None:
    chosen for about 8-16 tablets); ``key_serializer``/``value_serializer``: serializer names, see
    :func:`serializer_from_name`.
    """

    ID_FIELD: ClassVar[str] = "qid"
    ERROR: ClassVar[type[QueueError]] = QueueConfigError

    table: str = setting(MISSING, "the table holding the queue", flag=None)
    qid: str = setting(MISSING, "the queue id (the prefix of its rows)", flag=None, option="id")
    num_buckets: int = setting(MISSING, "the queue's bucket count", parse=integer(1, MAX_BUCKETS), flag=None,
                                option="buckets")
    buckets_per_tablet: int | None = setting(None, "buckets sharing one tablet", parse=integer(1), flag=None,
                                             option=None)
    key_serializer: str = setting(DEFAULT_SERIALIZER, "how keys are serialized: json, bytes or module:callable",
                                  flag=None)
    value_serializer: str = setting(DEFAULT_SERIALIZER, "how values are serialized: json, packed (the built-in "
                                    "translators' inputs, compact), bytes or module:callable", flag=None)

    def _check_serializers(self) -> None:
        if self.key_serializer.strip() == "packed":
            raise QueueConfigError("key_serializer 'packed' encodes export values (cells), not keys: use json or bytes")

    @cached_property
    def layout(self) -> QueueLayout:
        """The row layout of this queue."""
        return QueueLayout(self.qid, self.num_buckets)


#: the prefix of a queue's data source options
OPTION_PREFIX = "queue."


def queue_options(config: QueueConfig) -> dict[str, str]:
    """The queue as data source options (``queue.table``, ``queue.id``, ``queue.buckets``, serializers)."""
    return config.to_options(OPTION_PREFIX)
