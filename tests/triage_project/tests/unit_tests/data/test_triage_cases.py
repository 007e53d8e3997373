"""One test of each kind triage tells apart (the seed is the run's)."""

import os

SEED = int(os.environ.get("TRIAGE_SEED", "0"))
# The seeds on which the shuffle below comes out in the wrong order.
UNLUCKY_SEEDS = {1, 4, 100, 101}


def test_always_passes():
    assert sorted([3, 1, 2]) == [1, 2, 3]


def test_flaky_on_some_seeds():
    order = [1, 2, 3] if SEED not in UNLUCKY_SEEDS else [2, 1, 3]
    assert order == [1, 2, 3], f"worker order depends on seed {SEED}"


def test_broken_on_main():
    assert "tokens".upper() == "TOKENS!", "broken on main since before the branch"


def test_fails_on_the_branch():
    broken = os.environ.get("TRIAGE_BRANCH") == "1" and os.environ.get("TRIAGE_FIXED") != "1"
    assert not broken, "the branch's change broke this"
