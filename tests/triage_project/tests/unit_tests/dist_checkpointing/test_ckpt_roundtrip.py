"""A bucket under an allow-failure entry that passes again: a lift candidate."""


def test_roundtrip():
    assert dict(sorted({"b": 2, "a": 1}.items())) == {"a": 1, "b": 2}
