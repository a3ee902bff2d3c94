"""ex3_transformer_classifier: a TransformerEncoder classifier with mean pooling, vs an LSTM."""

from autograder.core.registry import Exercise

EXERCISE = Exercise(
    title="A TransformerEncoder classifier with mean pooling, against an LSTM",
    grading_seconds=6.1,
    trains=True,
    demo_mistake="batch_first_forgotten",
    checks_of={
        "make_mean_dataset": ("test_mean_dataset",),
        "PositionalEncoding": ("test_positional_encoding",),
        "TransformerClassifier": ("test_transformer_classifier",),
        "LSTMClassifier": ("test_lstm",),
        "count_parameters": ("test_count_parameters",),
        "train_classifier": ("test_train_classifier",),
        "evaluate_accuracy": ("test_evaluate_accuracy",),
    },
    small_demo={
        "VOCAB_SIZE = 3000, 1000,": "VOCAB_SIZE = 300, 100,",
        "LEARNING_RATE, SEED = 6,": "LEARNING_RATE, SEED = 1,",
    },
    probe_checks=frozenset(
        {
            "test_evaluate_accuracy_eval_mode_without_gradients",
            "test_evaluate_accuracy_matches_logits",
            "test_lstm_classifier_structure_and_logits",
            "test_lstm_parameter_count_comparable",
            "test_train_classifier_learns_mean_task",
            "test_train_classifier_returns_sample_weighted_epoch_losses",
            "test_train_classifier_seeded",
            "test_transformer_classifier_logits_per_sample",
            "test_transformer_classifier_mean_pools_encoder_output",
            "test_transformer_classifier_structure",
            "test_transformer_classifier_uses_positions",
        }
    ),
)
