"""Stands in for a functional case's checks (loss against golden values)."""

import os


def test_loss_matches_golden_values(request):
    seed = int(os.environ.get("EVIDENCE_SEED", "0"))
    # Some seeds diverge for real; on others the node's NCCL warm-up times out on
    # the first try only, and the rerun passes.
    assert seed % 6 != 5, "loss diverged from the golden values at step 120"
    first_try = getattr(request.node, "execution_count", 1) == 1
    assert not (seed % 4 == 2 and first_try), "NCCL timeout during warm-up"


def test_throughput():
    assert True
