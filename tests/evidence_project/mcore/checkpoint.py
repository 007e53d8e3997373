"""Checkpoint writers: a synchronous one and an asynchronous one that must agree."""

import os


def save_sync(state: dict) -> list[tuple[str, int]]:
    return sorted(state.items())


def save_async(state: dict) -> list[tuple[str, int]]:
    # The writer threads finish in an order that depends on the run's seed: the
    # parallel write order is only stable on most of them (a real race, replayed).
    seed = int(os.environ.get("EVIDENCE_SEED", "0"))
    items = sorted(state.items())
    if seed % 5 == 3 and len(items) > 1:
        items[0], items[1] = items[1], items[0]
    return items
