"""Stand-ins that the checks swap into a notebook for a function or class whose contract states
it exactly, where the notebook's own is wrong, while the checks of what is built on it run
(`authoring.upstream.on_the_contracts`): a fault is then charged once, to its own checks.
The child adds them to the probes (`STAND_INS`)."""


def contract_causal_mask():
    """ex5's causal_mask as its contract states it (float32 (L, L): 0.0 on and below the
    diagonal, -inf above): swapped in while the checks of a model built on it run, so that a
    fault of the notebook's causal_mask is charged to causal_mask's own checks only."""
    import torch

    def causal_mask(seq_len):
        return torch.triu(torch.full((seq_len, seq_len), float("-inf")), diagonal=1)

    return causal_mask


def contract_kv_cache():
    """ex7's KVCache as its contract states it (k, v (B, H_kv, T, head_dim) concatenated along
    time, None while empty; len = T): swapped in while the checks of an attention built on it
    run, so that a fault of the notebook's KVCache is charged to KVCache's own check only."""
    import torch

    class KVCache:
        def __init__(self):
            self.k = None
            self.v = None

        def append(self, k, v):
            self.k = k if self.k is None else torch.cat([self.k, k], dim=-2)
            self.v = v if self.v is None else torch.cat([self.v, v], dim=-2)

        def __len__(self):
            return 0 if self.k is None else self.k.shape[-2]

    return KVCache


STAND_INS = {
    "contract_causal_mask": contract_causal_mask,
    "contract_kv_cache": contract_kv_cache,
}
