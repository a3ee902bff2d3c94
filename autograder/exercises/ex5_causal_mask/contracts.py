"""ex5_causal_mask: the contract's own causal_mask, as stand-ins for
`authoring.upstream.on_the_contracts` (hidden: each is sent to the sandbox only at its swap)."""


def contract_causal_mask():
    """ex5's causal_mask as its contract states it (float32 (L, L): 0.0 on and below the
    diagonal, -inf above): swapped in while the checks of a model built on it run, so that a
    fault of the notebook's causal_mask is charged to causal_mask's own checks only."""
    import torch

    def causal_mask(seq_len):
        return torch.triu(torch.full((seq_len, seq_len), float("-inf")), diagonal=1)

    return causal_mask
