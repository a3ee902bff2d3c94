"""ex6_rope: rotary position embeddings, split-halves style (lesson 001, section 7)."""

from autograder.core.registry import Exercise

EXERCISE = Exercise(
    title="Rotary position embeddings (RoPE)",
    grading_seconds=3.0,
    demo_mistake="interleaved_pairs",
    checks_of={
        "rope_frequencies": ("test_rope_frequencies",),
        "apply_rope": ("test_apply_rope",),
        "RoPEAttention": ("test_rope_attention",),
        "relative_scores": ("test_relative_scores",),
    },
    core=False,
    probe_checks=frozenset(
        {
            "test_apply_rope_float32_in_float32_out",
        }
    ),
)
