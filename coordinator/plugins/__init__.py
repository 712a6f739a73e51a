"""The session's extension points and KAI's plugins that register on them (``hooks``,
``catalogue``); one module per plugin with hooks of its own."""

from coordinator.plugins.catalogue import hooks_for
from coordinator.plugins.hooks import (
    KAI_KEYS,
    JobKeys,
    MinimumKeeperHook,
    NodeHoldHook,
    NodeHolds,
    ScenarioValidatorHook,
    SessionHooks,
    VictimAccept,
    VictimFilterHook,
)

__all__ = [
    "KAI_KEYS",
    "JobKeys",
    "MinimumKeeperHook",
    "NodeHoldHook",
    "NodeHolds",
    "ScenarioValidatorHook",
    "SessionHooks",
    "VictimAccept",
    "VictimFilterHook",
    "hooks_for",
]
