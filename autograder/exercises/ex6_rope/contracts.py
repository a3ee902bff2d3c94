"""ex6_rope: the contract's own rope_frequencies and apply_rope, as stand-ins for
`authoring.upstream.on_the_contracts` (hidden: each is sent to the sandbox only at its swap)."""


def contract_rope_frequencies():
    """ex6's rope_frequencies as its contract states it (theta_i = base ** (-2i / head_dim),
    float64; ValueError for an odd head_dim): swapped in while the checks of apply_rope and of
    what is built on it run, so that a wrong frequency formula is charged to its own checks."""
    import torch

    def rope_frequencies(head_dim, base=10000.0):
        if head_dim <= 0 or head_dim % 2:
            raise ValueError(f"head_dim must be a positive even number, got {head_dim}")
        return base ** (-(torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))

    return rope_frequencies


def contract_apply_rope():
    """ex6's apply_rope as its contract states it (each pair (x_i, x_{i+h}) of row t rotated by
    (offset + t) * theta_i, angles in float64, a new tensor of x's shape and dtype), with its
    own frequencies (not the notebook's): swapped in while the checks of RoPEAttention and
    relative_scores run, so that a fault of the rotation is charged to its own checks."""
    import torch

    frequencies = contract_rope_frequencies()

    def apply_rope(x, offset=0, base=10000.0):
        half = x.shape[-1] // 2
        theta = frequencies(x.shape[-1], base)
        positions = torch.arange(offset, offset + x.shape[-2], dtype=torch.float64)
        angles = positions[:, None] * theta[None, :]
        cos, sin = torch.cos(angles).to(x.dtype), torch.sin(angles).to(x.dtype)
        first, second = x[..., :half], x[..., half:]
        return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)

    return apply_rope
