"""ex1_numpy_attention: Scaled dot-product attention in NumPy, checked against PyTorch."""

from autograder.core.registry import Exercise

EXERCISE = Exercise(
    title="Scaled dot-product attention in NumPy, checked against PyTorch",
    grading_seconds=3.0,
    demo_mistake="no_sqrt_scaling",
    checks_of={
        "make_qkv": ("test_make_qkv",),
        "softmax": ("test_softmax",),
        "scaled_dot_product_attention": ("test_sdpa",),
        "max_abs_diff_vs_torch": ("test_max_abs_diff",),
        "score_variance": ("test_score_variance",),
    },
    probe_checks=frozenset(
        {
            "test_max_abs_diff_compares_with_torch",
            "test_sdpa_uses_numpy_only",
            "test_softmax_matches_reference",
        }
    ),
)
