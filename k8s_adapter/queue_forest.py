"""The queues the cache hands the coordinator: only those whose ancestry reaches the top (KAI
drops orphans and their subtrees), each sent again only when it changed, and why the others are
left out (unreadable, or under an unusable parent) when that changes."""

from __future__ import annotations

from collections.abc import Mapping

from kai_ray.io.queue_tree import classify_queues
from kai_ray.model import Queue


class QueueForest:
    def __init__(self) -> None:
        self.invalid: dict[str, str] = {}  # queue -> why it could not be read
        self.dirty = False  # a queue came, changed, went or was refused since the last changes
        self._sent: set[str] = set()
        self._sent_unusable: dict[str, str] = {}

    def came(self, name: str) -> None:
        """The queue was read (new or changed): not refused any more, and the forest is to be redone."""
        self.invalid.pop(name, None)
        self.dirty = True

    def refused(self, name: str, why: str) -> None:
        self.invalid[name] = why
        self.dirty = True

    def forget_refusal(self, name: str) -> None:
        if self.invalid.pop(name, None) is not None:
            self.dirty = True

    def changes(
        self, queues: Mapping[str, Queue], changed: set[str]
    ) -> tuple[tuple[Queue, ...], tuple[str, ...], dict[str, str] | None]:
        """The usable queues new or ``changed`` since the last call, those no longer usable, and
        why each unusable one is left out (None: the same as last time)."""
        if not self.dirty:
            return (), (), None
        self.dirty = False
        forest = classify_queues(queues, self.invalid)
        valid = set(forest.usable)
        upserted = tuple(queues[n] for n in forest.usable if n in changed or n not in self._sent)
        removed = tuple(n for n in self._sent if n not in valid)
        self._sent = valid
        unusable = None if forest.unusable == self._sent_unusable else forest.unusable
        self._sent_unusable = forest.unusable
        return upserted, removed, unusable
