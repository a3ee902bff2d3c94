"""ex5_causal_mask: the contract's own causal_mask.

Swapped into a notebook where the notebook's own raises or answers wrongly, while the checks of
what is built on it run (`authoring.upstream.on_the_contracts`): a fault is then charged once,
to its own checks. This module lives with the hidden checks, because its code is the contract's
(a solution): it is sent to the sandbox as source at the moment of a swap (the child's
`stand_in` probe runs it in a fresh namespace) and is never in the sandbox before, so a notebook
cannot take a working part from the grader's runtime. Each factory is self-contained (its
imports inside) and returns the stand-in.
"""


def contract_causal_mask():
    """ex5's causal_mask as its contract states it (float32 (L, L): 0.0 on and below the
    diagonal, -inf above): swapped in while the checks of a model built on it run, so that a
    fault of the notebook's causal_mask is charged to causal_mask's own checks only."""
    import torch

    def causal_mask(seq_len):
        return torch.triu(torch.full((seq_len, seq_len), float("-inf")), diagonal=1)

    return causal_mask
