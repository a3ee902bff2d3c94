"""Reference solution for ex3_transformer_classifier: a TransformerEncoder classifier vs an LSTM."""

import torch
import torch.nn as nn
import torch.nn.functional as F


def make_mean_dataset(
    n_samples: int, seq_len: int = 20, vocab_size: int = 100, seed: int = 0
) -> tuple[torch.LongTensor, torch.LongTensor]:
    """Seeded X (n_samples, seq_len) int64 in [0, vocab_size) and labels y (n_samples,) int64.

    y = 1 where the sequence mean is strictly greater than vocab_size / 2, else 0.
    """
    generator = torch.Generator().manual_seed(seed)
    X = torch.randint(0, vocab_size, (n_samples, seq_len), generator=generator)
    y = (X.float().mean(dim=1) > vocab_size / 2).long()
    return X, y


class PositionalEncoding(nn.Module):
    """Sinusoidal positional encoding: forward(x (B, L, d_model)) returns x + PE[:L].

    PE[p, 2i] = sin(p / 10000^(2i/d_model)), PE[p, 2i+1] = cos(p / 10000^(2i/d_model)).
    """

    def __init__(self, d_model: int, max_len: int = 512) -> None:
        super().__init__()
        if d_model % 2 != 0:
            raise ValueError(f"d_model must be even, got {d_model}")
        position = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)
        exponent = torch.arange(0, d_model, 2, dtype=torch.float64) / d_model
        angle = position / torch.pow(10000.0, exponent)
        pe = torch.zeros(max_len, d_model, dtype=torch.float64)
        pe[:, 0::2] = torch.sin(angle)
        pe[:, 1::2] = torch.cos(angle)
        self.register_buffer("pe", pe.float(), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.pe[: x.size(1)].to(dtype=x.dtype)


class TransformerClassifier(nn.Module):
    """Sequence classifier: forward(x (B, L) long) returns logits (B, num_classes).

    Embedding, positional encoding, `self.encoder` (an nn.TransformerEncoder, batch_first),
    mean pooling over the sequence, a linear head; sample i's logits depend only on x[i].
    """

    def __init__(
        self,
        vocab_size: int = 100,
        d_model: int = 64,
        nhead: int = 4,
        num_layers: int = 2,
        num_classes: int = 2,
        dim_feedforward: int = 128,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.pos_encoder = PositionalEncoding(d_model)
        layer = nn.TransformerEncoderLayer(
            d_model, nhead, dim_feedforward=dim_feedforward, dropout=dropout, batch_first=True
        )
        # Nested tensors only pay off with padding masks; off, PyTorch never warns about them.
        self.encoder = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
        self.fc = nn.Linear(d_model, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.pos_encoder(self.embedding(x))  # (B, L, d_model)
        h = self.encoder(h)  # (B, L, d_model)
        return self.fc(h.mean(dim=1))  # mean over the sequence -> (B, num_classes)


class LSTMClassifier(nn.Module):
    """LSTM sequence classifier: forward(x (B, L) long) returns logits (B, num_classes).

    Built on nn.LSTM; its defaults give a parameter count within 20% of TransformerClassifier().
    """

    def __init__(
        self,
        vocab_size: int = 100,
        embed_dim: int = 64,
        hidden_dim: int = 100,
        num_classes: int = 2,
    ) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        self.lstm = nn.LSTM(embed_dim, hidden_dim, batch_first=True)
        self.fc = nn.Linear(hidden_dim, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _, (h_n, _) = self.lstm(self.embedding(x))  # h_n: (num_layers, B, hidden_dim)
        return self.fc(h_n[-1])


def count_parameters(model: nn.Module) -> int:
    """Return the number of trainable parameters of model."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def train_classifier(
    model: nn.Module,
    X: torch.Tensor,
    y: torch.Tensor,
    epochs: int = 30,
    batch_size: int = 64,
    lr: float = 1e-3,
    seed: int = 0,
) -> list[float]:
    """Train with Adam at lr on seeded shuffled mini-batches of (X, y), cross-entropy loss.

    Returns the sample-weighted mean training loss of each epoch (len == epochs); the same seed
    gives the same history whatever the global RNG state.
    """
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    n = X.size(0)
    history = []
    # A private RNG stream for anything random inside the model (e.g. dropout).
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
    optimizer.zero_grad(set_to_none=True)
    model.eval()
    return history


def evaluate_accuracy(model: nn.Module, X: torch.Tensor, y: torch.Tensor) -> float:
    """Fraction of samples whose predicted class (argmax of the logits) equals y, a Python float.

    Puts the model in eval mode and computes no gradients.
    """
    model.eval()
    with torch.no_grad():
        predictions = model(X).argmax(dim=1)
    return float((predictions == y).float().mean().item())
