"""Dataset blending: weights normalised to sum to one."""


def blend_weights(weights: list[float]) -> list[float]:
    total = sum(weights)
    if total <= 0:
        raise ValueError("weights must sum to more than zero")
    return [w / total for w in weights]
