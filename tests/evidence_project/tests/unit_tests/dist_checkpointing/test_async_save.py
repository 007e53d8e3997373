from mcore.checkpoint import save_async, save_sync


class TestAsyncSave:
    def test_async_is_equivalent_to_sync(self):
        state = {"a": 1}
        assert save_async(state) == save_sync(state)

    def test_parallel_write_order(self):
        state = {"layer.0": 1, "layer.1": 2, "layer.2": 3}
        assert save_async(state) == save_sync(state)

    def test_roundtrip(self):
        assert dict(save_sync({"x": 1})) == {"x": 1}
