"""ex4_gqa_analysis: the contract's own kv_projection_params, kv_cache_bytes and kv_cache_mib,
stand-ins for `authoring.upstream.on_the_contracts` (hidden: each is sent to the sandbox only at its
swap)."""


def contract_kv_projection_params():
    """ex4's kv_projection_params as its contract states it (the K and V weights, no bias)."""

    def kv_projection_params(d_model, n_heads, n_kv_heads):
        return 2 * d_model * n_kv_heads * (d_model // n_heads)

    return kv_projection_params


def contract_kv_cache_bytes():
    """ex4's kv_cache_bytes as its contract states it: swapped in while the checks of
    kv_cache_mib and gqa_report run, so that its fault is charged to its own checks."""

    def kv_cache_bytes(
        seq_len, n_kv_heads, head_dim, n_layers=1, batch_size=1, bytes_per_element=2
    ):
        return 2 * n_layers * batch_size * seq_len * n_kv_heads * head_dim * bytes_per_element

    return kv_cache_bytes


def contract_kv_cache_mib():
    """ex4's kv_cache_mib as its contract states it (kv_cache_bytes / 2**20, computed here)."""
    kv_cache_bytes = contract_kv_cache_bytes()

    def kv_cache_mib(seq_len, n_kv_heads, head_dim, n_layers=1, batch_size=1, bytes_per_element=2):
        return (
            kv_cache_bytes(seq_len, n_kv_heads, head_dim, n_layers, batch_size, bytes_per_element)
            / 2**20
        )

    return kv_cache_mib
