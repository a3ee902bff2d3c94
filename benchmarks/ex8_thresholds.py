"""ex8's training thresholds against the reference over seeds: held-out accuracy of
MultiplicativeAttention(16, 16) and AdditiveAttention(16, 16, 64) trained with train_pointer's
defaults on make_pointer_task(2000, seed=0), measured on make_pointer_task(500, seed=1), for
training seeds 0..N-1 and an unseeded (random) initialisation, as the check does.

    python benchmarks/ex8_thresholds.py [N]
"""

import sys

import torch

from autograder._reference import ex8_additive_attention as ref

torch.set_num_threads(1)
train, test = ref.make_pointer_task(2000, seed=0), ref.make_pointer_task(500, seed=1)
for name, make, threshold in (
    ("multiplicative", lambda: ref.MultiplicativeAttention(16, 16), 0.85),
    ("additive", lambda: ref.AdditiveAttention(16, 16, 64), 0.35),
):
    found = []
    for seed in range(int(sys.argv[1]) if len(sys.argv) > 1 else 10):
        torch.manual_seed(1000 + seed)  # the initialisation, as a student's module gets it
        module = make()
        ref.train_pointer(module, *train, seed=seed)
        found.append(ref.pointer_accuracy(module, *test))
    print(
        f"{name:<15} threshold {threshold}: min {min(found):.3f} max {max(found):.3f} "
        f"over {len(found)} seeds: {' '.join(f'{a:.3f}' for a in found)}"
    )
