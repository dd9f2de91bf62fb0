"""Data source options: where the gateways are and which queue, parsed in one place (the gateway and the
typed parsers live in :mod:`connector.accumulo.options`, below the Spark layer: the CLI's cluster file uses
them too)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from connector.accumulo.options import (
    GatewayOptions,
    OptionError,
    bool_option,
    float_option,
    int_option,
    refuse_secrets,
    str_option,
)
from connector.queue import QueueConfig
from connector.queue.config import queue_options

__all__ = ["GatewayOptions", "OptionError", "as_dict", "bool_option", "float_option", "int_option", "queue_config",
           "queue_options", "refuse_secrets"]


def queue_config(options: Mapping[str, str]) -> QueueConfig:
    """The queue named by ``queue.table``, ``queue.id``, ``queue.buckets`` (and optional serializers)."""
    try:
        return QueueConfig(
            table=str_option(options, "queue.table"),
            qid=str_option(options, "queue.id"),
            num_buckets=int_option(options, "queue.buckets", minimum=1),
            key_serializer=options.get("queue.key_serializer") or "json",
            value_serializer=options.get("queue.value_serializer") or "json",
        )
    except OptionError:
        raise
    except ValueError as exc:
        raise OptionError(f"queue options: {exc}") from None


def as_dict(options: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in dict(options).items()}
