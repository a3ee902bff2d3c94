"""ex7_kv_cache: cached autoregressive decoding with RoPE and grouped K/V heads (lesson 001, 8)."""

from autograder.core.registry import Exercise

EXERCISE = Exercise(
    title="Cached autoregressive decoding (KV cache)",
    grading_seconds=4.0,
    demo_mistake="new_tokens_rotated_from_position_0",
    checks_of={
        "KVCache": ("test_kv_cache",),
        "CachedSelfAttention": ("test_cached_attention",),
        "TinyLM": ("test_tinylm",),
        "generate": ("test_generate",),
        "kv_projections": ("test_kv_projections",),
    },
    core=False,
    probe_checks=frozenset(
        {
            "test_generate_runs_without_gradients",
            "test_kv_projections_match_a_hook_on_W_k",
        }
    ),
)
