"""Named mistakes of ex3_transformer_classifier (each a wrong version of a contract function or
class; a class mistake is a whole class under the contract's name)."""
# ruff: noqa: F811 - every mistake redefines the function or class it replaces

import torch
import torch.nn as nn
import torch.nn.functional as F

from autograder._reference.ex3_transformer_classifier import PositionalEncoding
from autograder.authoring import Catalogue

CATALOGUE = Catalogue("ex3_transformer_classifier")


# -- make_mean_dataset ---------------------------------------------------------------------------
@CATALOGUE.mistake(
    "labels_greater_or_equal",
    "a sequence whose mean is exactly vocab_size / 2 was labelled 1; the label is 1 only where "
    "the mean is strictly greater",
    check="test_mean_dataset_shapes_and_labels",
)
def make_mean_dataset(n_samples, seq_len=20, vocab_size=100, seed=0):
    generator = torch.Generator().manual_seed(seed)
    X = torch.randint(0, vocab_size, (n_samples, seq_len), generator=generator)
    return X, (X.float().mean(dim=1) >= vocab_size / 2).long()


@CATALOGUE.mistake(
    "labels_not_long",
    "the labels are a float tensor; F.cross_entropy needs class indices of dtype torch.long",
    check="test_mean_dataset_shapes_and_labels",
)
def make_mean_dataset(n_samples, seq_len=20, vocab_size=100, seed=0):
    generator = torch.Generator().manual_seed(seed)
    X = torch.randint(0, vocab_size, (n_samples, seq_len), generator=generator)
    return X, (X.float().mean(dim=1) > vocab_size / 2).float()


@CATALOGUE.mistake(
    "dataset_ignores_seed",
    "make_mean_dataset draws from the global random generator and ignores its seed",
    check="test_mean_dataset_seeded",
)
def make_mean_dataset(n_samples, seq_len=20, vocab_size=100, seed=0):
    X = torch.randint(0, vocab_size, (n_samples, seq_len))
    return X, (X.float().mean(dim=1) > vocab_size / 2).long()


# -- PositionalEncoding --------------------------------------------------------------------------
@CATALOGUE.mistake(
    "pe_sin_cos_swapped",
    "sin and cos were swapped: even columns (2i) take the sine, odd columns (2i+1) the cosine",
    check="test_positional_encoding_values",
)
class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=512):
        super().__init__()
        position = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)
        angle = position / 10000.0 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
        pe = torch.zeros(max_len, d_model, dtype=torch.float64)
        pe[:, 0::2] = torch.cos(angle)
        pe[:, 1::2] = torch.sin(angle)
        self.register_buffer("pe", pe.float(), persistent=False)

    def forward(self, x):
        return x + self.pe[: x.size(1)].to(x.dtype)


@CATALOGUE.mistake(
    "encoding_is_trainable",
    "the positional encoding is an nn.Parameter, so training changes it: PE is fixed by the "
    "formula (register_buffer)",
    check="test_positional_encoding_forward_adds",
)
class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=512):
        super().__init__()
        position = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)
        angle = position / 10000.0 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
        pe = torch.zeros(max_len, d_model, dtype=torch.float64)
        pe[:, 0::2] = torch.sin(angle)
        pe[:, 1::2] = torch.cos(angle)
        self.pe = nn.Parameter(pe.float())

    def forward(self, x):
        return x + self.pe[: x.size(1)].to(x.dtype)


@CATALOGUE.mistake(
    "pe_exponent_off",
    "the frequencies use 10000^(i/d_model) with i the pair index; the exponent is 2i/d_model",
    check="test_positional_encoding_values",
)
class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=512):
        super().__init__()
        position = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)
        angle = position / 10000.0 ** (torch.arange(d_model // 2, dtype=torch.float64) / d_model)
        pe = torch.zeros(max_len, d_model, dtype=torch.float64)
        pe[:, 0::2] = torch.sin(angle)
        pe[:, 1::2] = torch.cos(angle)
        self.register_buffer("pe", pe.float(), persistent=False)

    def forward(self, x):
        return x + self.pe[: x.size(1)].to(x.dtype)


@CATALOGUE.mistake(
    "pe_seq_first_layout",
    "the table is laid out for (L, B, d_model) inputs and sliced by x.size(0), so every token of "
    "sample b gets the encoding of position b; inputs are (B, L, d_model)",
    check="test_positional_encoding_values",
)
class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=512):
        super().__init__()
        position = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)
        angle = position / 10000.0 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
        pe = torch.zeros(max_len, 1, d_model, dtype=torch.float64)
        pe[:, 0, 0::2] = torch.sin(angle)
        pe[:, 0, 1::2] = torch.cos(angle)
        self.register_buffer("pe", pe.float(), persistent=False)

    def forward(self, x):
        return x + self.pe[: x.size(0)].to(x.dtype)


@CATALOGUE.mistake(
    "pe_scales_input",
    "forward multiplies x by sqrt(d_model) before adding the encoding; it should return "
    "x + PE[:L] unchanged otherwise",
    check="test_positional_encoding_forward_adds",
)
class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=512):
        super().__init__()
        position = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)
        angle = position / 10000.0 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
        pe = torch.zeros(max_len, d_model, dtype=torch.float64)
        pe[:, 0::2] = torch.sin(angle)
        pe[:, 1::2] = torch.cos(angle)
        self.register_buffer("pe", pe.float(), persistent=False)
        self.scale = d_model**0.5

    def forward(self, x):
        return x * self.scale + self.pe[: x.size(1)].to(x.dtype)


# -- TransformerClassifier -----------------------------------------------------------------------
@CATALOGUE.mistake(
    "batch_first_forgotten",
    "the encoder layers were built without batch_first=True, so the encoder reads (B, L, d) as "
    "(L, B, d) and attends across the samples of a batch instead of along each sequence",
    check="test_transformer_classifier_logits_per_sample",
)
class TransformerClassifier(nn.Module):
    def __init__(
        self,
        vocab_size=100,
        d_model=64,
        nhead=4,
        num_layers=2,
        num_classes=2,
        dim_feedforward=128,
        dropout=0.0,
    ):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.pos_encoder = PositionalEncoding(d_model)
        layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout)
        self.encoder = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
        self.fc = nn.Linear(d_model, num_classes)

    def forward(self, x):
        h = self.encoder(self.pos_encoder(self.embedding(x)))
        return self.fc(h.mean(dim=1))


@CATALOGUE.mistake(
    "num_layers_ignored",
    "the encoder always has two layers; it should have num_layers",
    check="test_transformer_classifier_structure",
)
class TransformerClassifier(nn.Module):
    def __init__(
        self,
        vocab_size=100,
        d_model=64,
        nhead=4,
        num_layers=2,
        num_classes=2,
        dim_feedforward=128,
        dropout=0.0,
    ):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.pos_encoder = PositionalEncoding(d_model)
        layer = nn.TransformerEncoderLayer(
            d_model, nhead, dim_feedforward, dropout, batch_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.fc = nn.Linear(d_model, num_classes)

    def forward(self, x):
        h = self.encoder(self.pos_encoder(self.embedding(x)))
        return self.fc(h.mean(dim=1))


@CATALOGUE.mistake(
    "pooled_over_features",
    "the mean was taken over the feature axis (d_model) instead of the sequence axis (dim=1)",
    check="test_transformer_classifier_logits_per_sample",
)
class TransformerClassifier(nn.Module):
    def __init__(
        self,
        vocab_size=100,
        d_model=64,
        nhead=4,
        num_layers=2,
        num_classes=2,
        dim_feedforward=128,
        dropout=0.0,
    ):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.pos_encoder = PositionalEncoding(d_model)
        layer = nn.TransformerEncoderLayer(
            d_model, nhead, dim_feedforward, dropout, batch_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
        self.fc = nn.Linear(d_model, num_classes)

    def forward(self, x):
        h = self.encoder(self.pos_encoder(self.embedding(x)))
        return self.fc(h.mean(dim=-1))


@CATALOGUE.mistake(
    "first_token_pooling",
    "the classifier reads the encoder's output at the first position only; the contract asks "
    "for the mean over all positions",
    check="test_transformer_classifier_mean_pools_encoder_output",
)
class TransformerClassifier(nn.Module):
    def __init__(
        self,
        vocab_size=100,
        d_model=64,
        nhead=4,
        num_layers=2,
        num_classes=2,
        dim_feedforward=128,
        dropout=0.0,
    ):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.pos_encoder = PositionalEncoding(d_model)
        layer = nn.TransformerEncoderLayer(
            d_model, nhead, dim_feedforward, dropout, batch_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
        self.fc = nn.Linear(d_model, num_classes)

    def forward(self, x):
        h = self.encoder(self.pos_encoder(self.embedding(x)))
        return self.fc(h[:, 0])


@CATALOGUE.mistake(
    "max_pooling",
    "the encoder's output was max-pooled over the sequence; the contract asks for the mean",
    check="test_transformer_classifier_mean_pools_encoder_output",
)
class TransformerClassifier(nn.Module):
    def __init__(
        self,
        vocab_size=100,
        d_model=64,
        nhead=4,
        num_layers=2,
        num_classes=2,
        dim_feedforward=128,
        dropout=0.0,
    ):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.pos_encoder = PositionalEncoding(d_model)
        layer = nn.TransformerEncoderLayer(
            d_model, nhead, dim_feedforward, dropout, batch_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
        self.fc = nn.Linear(d_model, num_classes)

    def forward(self, x):
        h = self.encoder(self.pos_encoder(self.embedding(x)))
        return self.fc(h.max(dim=1).values)


@CATALOGUE.mistake(
    "no_positional_encoding",
    "the positional encoding is never added, so the model cannot tell the order of the tokens "
    "(with mean pooling its output ignores their order entirely)",
    check="test_transformer_classifier_uses_positions",
)
class TransformerClassifier(nn.Module):
    def __init__(
        self,
        vocab_size=100,
        d_model=64,
        nhead=4,
        num_layers=2,
        num_classes=2,
        dim_feedforward=128,
        dropout=0.0,
    ):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model)
        layer = nn.TransformerEncoderLayer(
            d_model, nhead, dim_feedforward, dropout, batch_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
        self.fc = nn.Linear(d_model, num_classes)

    def forward(self, x):
        return self.fc(self.encoder(self.embedding(x)).mean(dim=1))


@CATALOGUE.mistake(
    "encoder_warns",
    "nn.TransformerEncoder prints a warning about nested tensors when its layers cannot use "
    "them (e.g. with norm_first=True or without batch_first=True); build it with "
    "enable_nested_tensor=False",
    check="test_transformer_classifier_runs_without_warnings",
)
class TransformerClassifier(nn.Module):
    def __init__(
        self,
        vocab_size=100,
        d_model=64,
        nhead=4,
        num_layers=2,
        num_classes=2,
        dim_feedforward=128,
        dropout=0.0,
    ):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.pos_encoder = PositionalEncoding(d_model)
        layer = nn.TransformerEncoderLayer(
            d_model, nhead, dim_feedforward, dropout, batch_first=True, norm_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, num_layers)
        self.fc = nn.Linear(d_model, num_classes)

    def forward(self, x):
        h = self.encoder(self.pos_encoder(self.embedding(x)))
        return self.fc(h.mean(dim=1))


# -- LSTMClassifier ------------------------------------------------------------------------------
@CATALOGUE.mistake(
    "lstm_too_small",
    "the LSTM's default sizes give far fewer parameters than the default TransformerClassifier "
    "(the comparison needs counts within 20% of each other)",
    check="test_lstm_parameter_count_comparable",
)
class LSTMClassifier(nn.Module):
    def __init__(self, vocab_size=100, embed_dim=32, hidden_dim=32, num_classes=2):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        self.lstm = nn.LSTM(embed_dim, hidden_dim, batch_first=True)
        self.fc = nn.Linear(hidden_dim, num_classes)

    def forward(self, x):
        _, (h_n, _) = self.lstm(self.embedding(x))
        return self.fc(h_n[-1])


@CATALOGUE.mistake(
    "lstm_batch_first_forgotten",
    "the LSTM was built without batch_first=True, so it runs along the batch axis of a "
    "(B, L, embed_dim) input instead of along each sequence",
    check="test_lstm_classifier_structure_and_logits",
)
class LSTMClassifier(nn.Module):
    def __init__(self, vocab_size=100, embed_dim=64, hidden_dim=100, num_classes=2):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        self.lstm = nn.LSTM(embed_dim, hidden_dim)
        self.fc = nn.Linear(hidden_dim, num_classes)

    def forward(self, x):
        _, (h_n, _) = self.lstm(self.embedding(x))
        return self.fc(h_n[-1])


# -- count_parameters ----------------------------------------------------------------------------
@CATALOGUE.mistake(
    "counts_frozen_parameters",
    "count_parameters also counted frozen parameters (requires_grad=False); count trainable ones",
    check="test_count_parameters_counts_trainable_only",
)
def count_parameters(model):
    return sum(p.numel() for p in model.parameters())


@CATALOGUE.mistake(
    "counts_parameter_tensors",
    "count_parameters counted parameter tensors, not their elements (use p.numel())",
    check="test_count_parameters_counts_trainable_only",
)
def count_parameters(model):
    return len([p for p in model.parameters() if p.requires_grad])


# -- train_classifier ----------------------------------------------------------------------------
@CATALOGUE.mistake(
    "loss_mean_of_batch_means",
    "the epoch loss is the plain mean of the batch losses; weight each batch's loss by its own "
    "number of samples (the last batch is smaller) and divide by the number of samples",
    check="test_train_classifier_returns_sample_weighted_epoch_losses",
)
def train_classifier(model, X, y, epochs=30, batch_size=64, lr=1e-3, seed=0):
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    history = []
    for _ in range(epochs):
        model.train()
        losses = []
        for idx in torch.randperm(len(X), generator=generator).split(batch_size):
            loss = F.cross_entropy(model(X[idx]), y[idx])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        history.append(sum(losses) / len(losses))
    return history


@CATALOGUE.mistake(
    "train_ignores_seed",
    "the mini-batches are shuffled with the global random generator, so the seed has no effect "
    "and the history depends on whatever ran before",
    check="test_train_classifier_seeded",
)
def train_classifier(model, X, y, epochs=30, batch_size=64, lr=1e-3, seed=0):
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    history = []
    for _ in range(epochs):
        model.train()
        total = 0.0
        for idx in torch.randperm(len(X)).split(batch_size):
            loss = F.cross_entropy(model(X[idx]), y[idx])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * len(idx)
        history.append(total / len(X))
    return history


@CATALOGUE.mistake(
    "optimizer_never_steps",
    "the optimizer never updates the weights (optimizer.step() is missing), so nothing is learnt",
    check="test_train_classifier_learns_mean_task",
)
def train_classifier(model, X, y, epochs=30, batch_size=64, lr=1e-3, seed=0):
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    history = []
    for _ in range(epochs):
        model.train()
        total = 0.0
        for idx in torch.randperm(len(X), generator=generator).split(batch_size):
            loss = F.cross_entropy(model(X[idx]), y[idx])
            optimizer.zero_grad()
            loss.backward()
            total += loss.item() * len(idx)
        history.append(total / len(X))
    return history


# -- evaluate_accuracy ---------------------------------------------------------------------------
@CATALOGUE.mistake(
    "accuracy_returns_tensor",
    "evaluate_accuracy returns a tensor; convert it with .item() or float()",
    check="test_evaluate_accuracy_matches_logits",
)
def evaluate_accuracy(model, X, y):
    model.eval()
    with torch.no_grad():
        return (model(X).argmax(dim=1) == y).float().mean()


@CATALOGUE.mistake(
    "accuracy_without_eval",
    "evaluate_accuracy runs the model in training mode (dropout stays on); call "
    "model.eval() before the forward passes (restoring the previous mode afterwards is fine)",
    check="test_evaluate_accuracy_matches_logits",
)
def evaluate_accuracy(model, X, y):
    with torch.no_grad():
        return float((model(X).argmax(dim=1) == y).float().mean())


@CATALOGUE.mistake(
    "accuracy_with_gradients",
    "evaluate_accuracy runs the model with gradients on; wrap it in torch.no_grad() (or "
    "torch.inference_mode())",
    check="test_evaluate_accuracy_eval_mode_without_gradients",
)
def evaluate_accuracy(model, X, y):
    model.eval()
    return float((model(X).argmax(dim=1) == y).float().mean())


# -- round 2 (issue 8) ---------------------------------------------------------------------------
@CATALOGUE.mistake(
    "labels_floor_half_vocab",
    "the threshold was vocab_size // 2 (rounded down); the label is 1 where the mean is strictly "
    "greater than vocab_size / 2, which differs for an odd vocab_size",
    check="test_mean_dataset_shapes_and_labels",
)
def make_mean_dataset(n_samples, seq_len=20, vocab_size=100, seed=0):
    generator = torch.Generator().manual_seed(seed)
    X = torch.randint(0, vocab_size, (n_samples, seq_len), generator=generator)
    return X, (X.float().mean(dim=1) > vocab_size // 2).long()


@CATALOGUE.mistake(
    "lstm_first_token_state",
    "the LSTM classifies from its output after the first token, so the rest of the sequence "
    "is ignored; use the state after the last token (h_n)",
    check="test_lstm_classifier_reads_the_whole_sequence",
)
class LSTMClassifier(nn.Module):
    def __init__(self, vocab_size=100, embed_dim=64, hidden_dim=100, num_classes=2):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        self.lstm = nn.LSTM(embed_dim, hidden_dim, batch_first=True)
        self.fc = nn.Linear(hidden_dim, num_classes)

    def forward(self, x):
        output, _ = self.lstm(self.embedding(x))
        return self.fc(output[:, 0])


@CATALOGUE.mistake(
    "no_zero_grad",
    "the gradients were never reset (no optimizer.zero_grad()), so each step uses the sum of "
    "all gradients so far",
    check="test_train_classifier_learns_mean_task",
)
def train_classifier(model, X, y, epochs=30, batch_size=64, lr=1e-3, seed=0):
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    n, history = X.size(0), []
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model.train()
        for _ in range(epochs):
            order = torch.randperm(n, generator=generator)
            total = 0.0
            for start in range(0, n, batch_size):
                idx = order[start : start + batch_size]
                loss = F.cross_entropy(model(X[idx]), y[idx])
                loss.backward()
                optimizer.step()
                total += loss.item() * idx.numel()
            history.append(total / n)
    return history


# -- validity round 4: a breaker for every clause and every argument ---------------------------
@CATALOGUE.mistake(
    "classifier_ignores_vocab_size",
    "TransformerClassifier ignores vocab_size: its embedding always has the default 100 rows",
    check="test_transformer_classifier_structure",
)
class TransformerClassifier(nn.Module):
    def __init__(
        self,
        vocab_size=100,
        d_model=64,
        nhead=4,
        num_layers=2,
        num_classes=2,
        dim_feedforward=128,
        dropout=0.0,
    ):
        super().__init__()
        vocab_size, d_model, nhead, num_classes = 100, d_model, nhead, num_classes
        dim_feedforward, dropout = dim_feedforward, dropout
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.pos_encoder = PositionalEncoding(d_model)
        layer = nn.TransformerEncoderLayer(
            d_model, nhead, dim_feedforward=dim_feedforward, dropout=dropout, batch_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
        self.fc = nn.Linear(d_model, num_classes)

    def forward(self, x):
        return self.fc(self.encoder(self.pos_encoder(self.embedding(x))).mean(dim=1))


@CATALOGUE.mistake(
    "classifier_ignores_d_model",
    "TransformerClassifier ignores d_model: its layers always have the default 64 features",
    check="test_transformer_classifier_structure",
)
class TransformerClassifier(nn.Module):
    def __init__(
        self,
        vocab_size=100,
        d_model=64,
        nhead=4,
        num_layers=2,
        num_classes=2,
        dim_feedforward=128,
        dropout=0.0,
    ):
        super().__init__()
        vocab_size, d_model, nhead, num_classes = vocab_size, 64, nhead, num_classes
        dim_feedforward, dropout = dim_feedforward, dropout
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.pos_encoder = PositionalEncoding(d_model)
        layer = nn.TransformerEncoderLayer(
            d_model, nhead, dim_feedforward=dim_feedforward, dropout=dropout, batch_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
        self.fc = nn.Linear(d_model, num_classes)

    def forward(self, x):
        return self.fc(self.encoder(self.pos_encoder(self.embedding(x))).mean(dim=1))


@CATALOGUE.mistake(
    "classifier_ignores_dim_feedforward",
    "TransformerClassifier ignores dim_feedforward: its layers always have the default 128",
    check="test_transformer_classifier_structure",
)
class TransformerClassifier(nn.Module):
    def __init__(
        self,
        vocab_size=100,
        d_model=64,
        nhead=4,
        num_layers=2,
        num_classes=2,
        dim_feedforward=128,
        dropout=0.0,
    ):
        super().__init__()
        vocab_size, d_model, nhead, num_classes = vocab_size, d_model, nhead, num_classes
        dim_feedforward, dropout = 128, dropout
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.pos_encoder = PositionalEncoding(d_model)
        layer = nn.TransformerEncoderLayer(
            d_model, nhead, dim_feedforward=dim_feedforward, dropout=dropout, batch_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
        self.fc = nn.Linear(d_model, num_classes)

    def forward(self, x):
        return self.fc(self.encoder(self.pos_encoder(self.embedding(x))).mean(dim=1))


@CATALOGUE.mistake(
    "classifier_ignores_num_classes",
    "TransformerClassifier ignores num_classes: it always gives the default 2 logits",
    check="test_transformer_classifier_logits_per_sample",
)
class TransformerClassifier(nn.Module):
    def __init__(
        self,
        vocab_size=100,
        d_model=64,
        nhead=4,
        num_layers=2,
        num_classes=2,
        dim_feedforward=128,
        dropout=0.0,
    ):
        super().__init__()
        vocab_size, d_model, nhead, num_classes = vocab_size, d_model, nhead, 2
        dim_feedforward, dropout = dim_feedforward, dropout
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.pos_encoder = PositionalEncoding(d_model)
        layer = nn.TransformerEncoderLayer(
            d_model, nhead, dim_feedforward=dim_feedforward, dropout=dropout, batch_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
        self.fc = nn.Linear(d_model, num_classes)

    def forward(self, x):
        return self.fc(self.encoder(self.pos_encoder(self.embedding(x))).mean(dim=1))


@CATALOGUE.mistake(
    "nhead_ignored",
    "TransformerClassifier ignores nhead: its layers have a single head, whatever nhead says",
    check="test_transformer_classifier_structure",
)
class TransformerClassifier(nn.Module):
    def __init__(
        self,
        vocab_size=100,
        d_model=64,
        nhead=4,
        num_layers=2,
        num_classes=2,
        dim_feedforward=128,
        dropout=0.0,
    ):
        super().__init__()
        vocab_size, d_model, nhead, num_classes = vocab_size, d_model, 1, num_classes
        dim_feedforward, dropout = dim_feedforward, dropout
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.pos_encoder = PositionalEncoding(d_model)
        layer = nn.TransformerEncoderLayer(
            d_model, nhead, dim_feedforward=dim_feedforward, dropout=dropout, batch_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
        self.fc = nn.Linear(d_model, num_classes)

    def forward(self, x):
        return self.fc(self.encoder(self.pos_encoder(self.embedding(x))).mean(dim=1))


@CATALOGUE.mistake(
    "classifier_ignores_dropout",
    "TransformerClassifier ignores dropout: its layers always use the default 0.0",
    check="test_transformer_classifier_structure",
)
class TransformerClassifier(nn.Module):
    def __init__(
        self,
        vocab_size=100,
        d_model=64,
        nhead=4,
        num_layers=2,
        num_classes=2,
        dim_feedforward=128,
        dropout=0.0,
    ):
        super().__init__()
        vocab_size, d_model, nhead, num_classes = vocab_size, d_model, nhead, num_classes
        dim_feedforward, dropout = dim_feedforward, 0.0
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.pos_encoder = PositionalEncoding(d_model)
        layer = nn.TransformerEncoderLayer(
            d_model, nhead, dim_feedforward=dim_feedforward, dropout=dropout, batch_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
        self.fc = nn.Linear(d_model, num_classes)

    def forward(self, x):
        return self.fc(self.encoder(self.pos_encoder(self.embedding(x))).mean(dim=1))


@CATALOGUE.mistake(
    "lstm_ignores_vocab_size",
    "LSTMClassifier ignores vocab_size: its embedding always has the default 100 rows",
    check="test_lstm_classifier_structure_and_logits",
)
class LSTMClassifier(nn.Module):
    def __init__(self, vocab_size=100, embed_dim=64, hidden_dim=100, num_classes=2):
        super().__init__()
        vocab_size, embed_dim, hidden_dim, num_classes = 100, embed_dim, hidden_dim, num_classes
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        self.lstm = nn.LSTM(embed_dim, hidden_dim, batch_first=True)
        self.fc = nn.Linear(hidden_dim, num_classes)

    def forward(self, x):
        _, (h_n, _) = self.lstm(self.embedding(x))
        return self.fc(h_n[-1])


@CATALOGUE.mistake(
    "lstm_ignores_embed_dim",
    "LSTMClassifier ignores embed_dim: its embedding always has the default 64 features",
    check="test_lstm_classifier_structure_and_logits",
)
class LSTMClassifier(nn.Module):
    def __init__(self, vocab_size=100, embed_dim=64, hidden_dim=100, num_classes=2):
        super().__init__()
        vocab_size, embed_dim, hidden_dim, num_classes = vocab_size, 64, hidden_dim, num_classes
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        self.lstm = nn.LSTM(embed_dim, hidden_dim, batch_first=True)
        self.fc = nn.Linear(hidden_dim, num_classes)

    def forward(self, x):
        _, (h_n, _) = self.lstm(self.embedding(x))
        return self.fc(h_n[-1])


@CATALOGUE.mistake(
    "lstm_ignores_hidden_dim",
    "LSTMClassifier ignores hidden_dim: its LSTM always has the default 100 units",
    check="test_lstm_classifier_structure_and_logits",
)
class LSTMClassifier(nn.Module):
    def __init__(self, vocab_size=100, embed_dim=64, hidden_dim=100, num_classes=2):
        super().__init__()
        vocab_size, embed_dim, hidden_dim, num_classes = vocab_size, embed_dim, 100, num_classes
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        self.lstm = nn.LSTM(embed_dim, hidden_dim, batch_first=True)
        self.fc = nn.Linear(hidden_dim, num_classes)

    def forward(self, x):
        _, (h_n, _) = self.lstm(self.embedding(x))
        return self.fc(h_n[-1])


@CATALOGUE.mistake(
    "lstm_ignores_num_classes",
    "LSTMClassifier ignores num_classes: it always gives the default 2 logits",
    check="test_lstm_classifier_structure_and_logits",
)
class LSTMClassifier(nn.Module):
    def __init__(self, vocab_size=100, embed_dim=64, hidden_dim=100, num_classes=2):
        super().__init__()
        vocab_size, embed_dim, hidden_dim, num_classes = vocab_size, embed_dim, hidden_dim, 2
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        self.lstm = nn.LSTM(embed_dim, hidden_dim, batch_first=True)
        self.fc = nn.Linear(hidden_dim, num_classes)

    def forward(self, x):
        _, (h_n, _) = self.lstm(self.embedding(x))
        return self.fc(h_n[-1])


@CATALOGUE.mistake(
    "dataset_ignores_seq_len",
    "make_mean_dataset ignores seq_len: every sequence has the default 20 tokens",
    check="test_mean_dataset_shapes_and_labels",
)
def make_mean_dataset(n_samples, seq_len=20, vocab_size=100, seed=0):
    generator = torch.Generator().manual_seed(seed)
    X = torch.randint(0, vocab_size, (n_samples, 20), generator=generator)
    return X, (X.float().mean(dim=1) > vocab_size / 2).long()


@CATALOGUE.mistake(
    "dataset_ignores_vocab_size",
    "make_mean_dataset ignores vocab_size: tokens are drawn from the default 100 values (and "
    "labelled against 50)",
    check="test_mean_dataset_shapes_and_labels",
)
def make_mean_dataset(n_samples, seq_len=20, vocab_size=100, seed=0):
    generator = torch.Generator().manual_seed(seed)
    X = torch.randint(0, 100, (n_samples, seq_len), generator=generator)
    return X, (X.float().mean(dim=1) > 100 / 2).long()


@CATALOGUE.mistake(
    "pe_ignores_max_len",
    "PositionalEncoding ignores max_len: its table always has the default 512 positions, so "
    "longer sequences (up to max_len) fail",
    check="test_positional_encoding_values",
)
class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=512):
        super().__init__()
        position = torch.arange(512, dtype=torch.float64).unsqueeze(1)
        angle = position / torch.pow(10000.0, torch.arange(0, d_model, 2).double() / d_model)
        pe = torch.zeros(512, d_model, dtype=torch.float64)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(angle), torch.cos(angle)
        self.register_buffer("pe", pe.float(), persistent=False)

    def forward(self, x):
        return x + self.pe[: x.size(1)].to(dtype=x.dtype)


@CATALOGUE.mistake(
    "train_ignores_epochs",
    "train_classifier ignores epochs: it always trains for the default 30 epochs",
    check="test_train_classifier_returns_sample_weighted_epoch_losses",
)
def train_classifier(model, X, y, epochs=30, batch_size=64, lr=1e-3, seed=0):
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    n, history = X.size(0), []
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model.train()
        for _ in range(30):
            order = torch.randperm(n, generator=generator)
            total = 0.0
            for start in range(0, n, batch_size):
                idx = order[start : start + batch_size]
                loss = F.cross_entropy(model(X[idx]), y[idx])
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                total += loss.item() * idx.numel()
            history.append(total / n)
    model.eval()
    return history


@CATALOGUE.mistake(
    "train_ignores_batch_size",
    "train_classifier ignores batch_size: its mini-batches always have the default 64 samples",
    check="test_train_classifier_returns_sample_weighted_epoch_losses",
)
def train_classifier(model, X, y, epochs=30, batch_size=64, lr=1e-3, seed=0):
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    n, history = X.size(0), []
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model.train()
        for _ in range(epochs):
            order = torch.randperm(n, generator=generator)
            total = 0.0
            for start in range(0, n, 64):
                idx = order[start : start + 64]
                loss = F.cross_entropy(model(X[idx]), y[idx])
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                total += loss.item() * idx.numel()
            history.append(total / n)
    model.eval()
    return history


@CATALOGUE.mistake(
    "train_ignores_lr",
    "train_classifier ignores lr: Adam always gets the default 1e-3",
    check="test_train_classifier_returns_sample_weighted_epoch_losses",
)
def train_classifier(model, X, y, epochs=30, batch_size=64, lr=1e-3, seed=0):
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    n, history = X.size(0), []
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model.train()
        for _ in range(epochs):
            order = torch.randperm(n, generator=generator)
            total = 0.0
            for start in range(0, n, batch_size):
                idx = order[start : start + batch_size]
                loss = F.cross_entropy(model(X[idx]), y[idx])
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                total += loss.item() * idx.numel()
            history.append(total / n)
    model.eval()
    return history
