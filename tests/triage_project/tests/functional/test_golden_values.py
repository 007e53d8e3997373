"""Stands in for a functional case under an allow-failure entry: it fails."""


def test_loss_matches_golden_values():
    assert 2.31 == 2.29, "loss 2.31 at step 100, golden value 2.29"


def test_throughput():
    assert True
