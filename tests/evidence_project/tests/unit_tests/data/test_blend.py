import pytest
from mcore.blend import blend_weights


def test_blend_weights():
    assert blend_weights([1.0, 3.0]) == [0.25, 0.75]


def test_blend_rejects_empty():
    with pytest.raises(ValueError):
        blend_weights([])


@pytest.mark.skip(reason="needs the full corpus")
def test_blend_full_corpus():
    pass
