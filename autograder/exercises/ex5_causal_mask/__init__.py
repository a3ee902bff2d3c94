"""ex5_causal_mask: The causal mask, and a small causal transformer on a sine wave."""

from autograder.core.registry import Exercise

EXERCISE = Exercise(
    title="The causal mask, and a small causal transformer on a sine wave",
    grading_seconds=4.3,
    trains=True,
    demo_mistake="reversed_triangle",
    checks_of={
        "causal_mask": ("test_causal_mask",),
        "masked_attention": ("test_masked_attention",),
        "discretize_sine": ("test_discretize_sine",),
        "make_windows": ("test_make_windows",),
        "split_holdout": ("test_split_holdout",),
        "CausalTransformer": ("test_causal_transformer",),
        "train_lm": ("test_train_lm",),
        "next_token_accuracy": ("test_next_token_accuracy",),
    },
    small_demo={
        "CONTEXT_LEN = 1000,": "CONTEXT_LEN = 300,",
        "LEARNING_RATE, SEED = 5,": "LEARNING_RATE, SEED = 1,",
    },
    probe_checks=frozenset(
        {
            "test_causal_transformer_is_causal",
            "test_causal_transformer_output_shape",
            "test_next_token_accuracy_matches_predictions",
            "test_train_lm_learns_the_sine",
            "test_train_lm_reports_sample_weighted_loss",
        }
    ),
)
