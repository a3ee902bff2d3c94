"""ex8_additive_attention: additive, multiplicative and dot-product attention (lesson 002)."""

from autograder.core.registry import Exercise

EXERCISE = Exercise(
    title="Additive, multiplicative and scaled dot-product attention",
    grading_seconds=9.0,
    trains=True,
    demo_mistake="softmax_over_the_singleton_axis",
    checks_of={
        "AdditiveAttention": ("test_additive",),
        "MultiplicativeAttention": ("test_multiplicative",),
        "ScaledDotAttention": ("test_scaled_dot",),
        "attention_parameter_counts": ("test_parameter_counts",),
        "make_pointer_task": ("test_pointer_task",),
        "train_pointer": ("test_train_pointer",),
        "pointer_accuracy": ("test_pointer_accuracy",),
    },
    core=False,
    small_demo={
        "make_pointer_task(2000, seed=0)": "make_pointer_task(200, seed=0)",
        "train_pointer(module, *train_data)": "train_pointer(module, *train_data, epochs=3)",
    },
    probe_checks=frozenset(
        {
            "test_pointer_accuracy_of_a_pointing_module",
            "test_train_pointer_reports_the_sample_weighted_loss",
        }
    ),
)
