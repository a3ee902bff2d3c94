"""ex2_attention_heatmap: Multi-head self-attention on a sentence, as a labelled heatmap."""

from autograder.core.registry import Exercise

EXERCISE = Exercise(
    title="Multi-head self-attention on a sentence, as a labelled heatmap",
    grading_seconds=4.1,
    demo_mistake="heatmap_transposed",
    checks_of={
        "tokenize": ("test_tokenize",),
        "build_vocab": ("test_build_vocab",),
        "MultiHeadAttention": ("test_mha",),
        "sentence_attention": ("test_sentence_attention",),
        "plot_attention": ("test_plot_attention",),
        "strongest_attention": ("test_strongest_attention",),
    },
    probe_checks=frozenset(
        {
            "test_plot_attention_cells_show_the_weights",
            "test_plot_attention_has_colorbar_and_title",
            "test_plot_attention_ticks_label_cell_centres",
            "test_sentence_attention_is_seeded",
            "test_sentence_attention_same_word_same_weights",
            "test_sentence_attention_shapes_and_rows",
        }
    ),
)
