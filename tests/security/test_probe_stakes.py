"""The checks that use a probe's answer (evidence the child reports about its own objects), per
exercise. A notebook that takes over the child's request pipe can answer probes as it likes (an
independent attacker did, README "What probes cannot prove"), so these are the points such a
notebook could forge; a value a check pays for is always compared in the grader. The table is
kept by hand: a new check that uses a probe must be added here on purpose."""

from __future__ import annotations

import ast
import importlib
import inspect

import pytest

from autograder.exercises import EXERCISES

PROBE_HELPERS = {"call_evaluating", "trained_in_batches", "_summary", "module_summary_of"}
STAKES = {
    "ex1_numpy_attention": {"test_sdpa_uses_numpy_only", "test_max_abs_diff_compares_with_torch"},
    "ex2_attention_heatmap": {
        "test_sentence_attention_shapes_and_rows",
        "test_sentence_attention_is_seeded",
        "test_sentence_attention_same_word_same_weights",
        "test_plot_attention_cells_show_the_weights",
        "test_plot_attention_ticks_label_cell_centres",
        "test_plot_attention_has_colorbar_and_title",
    },
    "ex3_transformer_classifier": {
        "test_transformer_classifier_structure",
        "test_transformer_classifier_logits_per_sample",
        "test_transformer_classifier_mean_pools_encoder_output",
        "test_transformer_classifier_uses_positions",
        "test_lstm_classifier_structure_and_logits",
        "test_lstm_parameter_count_comparable",
        "test_train_classifier_seeded",
        "test_train_classifier_learns_mean_task",
        "test_evaluate_accuracy_matches_logits",
        "test_evaluate_accuracy_eval_mode_without_gradients",
    },
    "ex4_gqa_analysis": {"test_gqa_report_output_shape_from_forward_pass"},
    "ex5_causal_mask": {
        "test_causal_transformer_output_shape",
        "test_causal_transformer_is_causal",
        "test_train_lm_reports_sample_weighted_loss",
        "test_train_lm_deterministic_for_a_seed",
        "test_train_lm_learns_the_sine",
        "test_next_token_accuracy_matches_predictions",
    },
    "ex6_rope": {"test_apply_rope_float32_in_float32_out"},
    "ex7_kv_cache": {
        "test_generate_runs_without_gradients",
        "test_kv_projections_match_a_hook_on_W_k",
    },
    "ex8_additive_attention": {
        "test_train_pointer_reports_the_sample_weighted_loss",
        "test_pointer_accuracy_of_a_pointing_module",
    },
}


def probing_checks(exercise: str) -> set[str]:
    """The checks of `exercise` whose code (or a function of the checks module it calls) asks
    the child for a probe, directly or through the check-author API's probe helpers."""
    module = importlib.import_module(f"autograder.exercises.{exercise}.checks")
    source = inspect.getsource(module)
    functions = {
        node.name: node for node in ast.parse(source).body if isinstance(node, ast.FunctionDef)
    }

    def probes(name: str, seen: frozenset[str] = frozenset()) -> bool:
        node = functions.get(name)
        if node is None or name in seen:
            return name in PROBE_HELPERS
        if ".probe(" in (ast.get_source_segment(source, node) or ""):
            return True
        called = {
            call.func.id
            for call in ast.walk(node)
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
        }
        return any(probes(callee, seen | {name}) for callee in called)

    return {name for name in functions if name.startswith("test_") and probes(name)}


@pytest.mark.parametrize("exercise", EXERCISES)
def test_the_checks_that_rest_on_probes_are_the_listed_ones(exercise):
    assert probing_checks(exercise) == STAKES[exercise]
