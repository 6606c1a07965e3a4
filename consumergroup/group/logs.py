"""GroupLogger: every log record of a group member carries its group id and member id.

Records get two attributes, ``group_id`` and ``member_id`` (``"-"`` before the
first join), usable in a format string (``%(group_id)s``) or by a structured
(JSON) formatter, and the message starts with ``group 'G' member M:`` so plain
logs read the same.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, MutableMapping
from typing import Any


class GroupLogger(logging.LoggerAdapter):  # type: ignore[type-arg]
    """A logger adapter for one member: ``member_id`` is read at each call (it changes)."""

    def __init__(self, logger: logging.Logger, group_id: str, member_id: Callable[[], str]) -> None:
        super().__init__(logger, {"group_id": group_id})
        self.group_id = group_id
        self._member_id = member_id

    def process(
        self, msg: Any, kwargs: MutableMapping[str, Any]
    ) -> tuple[Any, MutableMapping[str, Any]]:
        """Prefix the message and add ``group_id``/``member_id`` to the record."""
        member = self._member_id() or "-"
        kwargs["extra"] = {
            **(kwargs.get("extra") or {}),
            "group_id": self.group_id,
            "member_id": member,
        }
        return f"group {self.group_id!r} member {member}: {msg}", kwargs
