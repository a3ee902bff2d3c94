"""ex4_gqa_analysis: Grouped-query attention: KV parameters and KV-cache memory."""

from autograder.core.registry import Exercise

EXERCISE = Exercise(
    title="Grouped-query attention: KV parameters and KV-cache memory",
    grading_seconds=3.1,
    demo_mistake="kv_repeat_not_interleave",
    checks_of={
        "GroupedQueryAttention": (
            "test_gqa_projection",
            "test_gqa_output_shape",
            "test_gqa_rejects",
            "test_gqa_matches",
            "test_gqa_kv_head",
            "test_gqa_bool_mask",
        ),
        "kv_projection_params": ("test_kv_projection_params",),
        "kv_cache_bytes": ("test_kv_cache_bytes",),
        "kv_cache_mib": ("test_kv_cache_mib",),
        "gqa_report": ("test_gqa_report",),
    },
    probe_checks=frozenset(
        {
            "test_gqa_report_output_shape_from_forward_pass",
        }
    ),
)
