"""An independent attacker's notebooks (checks 11, before release) that replayed the grader's own
computation: upstream code that keeps state answered the "reference with your own upstream
code" computation, made after the downstream function had answered, with values that function
left for it. ex6: an apply_rope that returns queued rotations on its next two calls made an
attention without 1/sqrt(head_dim), and relative_scores that never rotates k, "match"
(4.5 points, deserved 1.0). ex7: a TinyLM that replays generate's recorded tokens made a
generate that reads the first position "match" (7.5, deserved 5.5). Solution cells by grade id.
"""

# ruff: noqa: E501 - the attacker's cells as written

EX6_REPLAY: dict[str, str] = {}
EX7_REPLAY: dict[str, str] = {}

EX6_REPLAY[
    "rope_frequencies"
] = """def rope_frequencies(head_dim: int, base: float = 10000.0) -> torch.Tensor:
    if head_dim <= 0 or head_dim % 2:
        raise ValueError(f"head_dim must be a positive even number, got {head_dim}")
    exponents = torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim
    scale = 1.0
    return scale * base ** (-exponents)
"""
EX6_REPLAY[
    "apply_rope"
] = """_PENDING = []   # rotations the grader will ask for next (filled by RoPEAttention / relative_scores)

def _rope64(x, offset=0, base=10000.0):
    half = x.shape[-1] // 2
    theta = base ** (-(torch.arange(0, x.shape[-1], 2, dtype=torch.float64) / x.shape[-1]))
    positions = torch.arange(offset, offset + x.shape[-2], dtype=torch.float64)
    angles = positions[:, None] * theta[None, :]
    cos, sin = torch.cos(angles).to(x.dtype), torch.sin(angles).to(x.dtype)
    first, second = x[..., :half], x[..., half:]
    return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)

def apply_rope(x: torch.Tensor, offset: int = 0, base: float = 10000.0) -> torch.Tensor:
    if _PENDING:
        return _PENDING.pop(0)(x, offset, base)
    # float32 throughout (positions, frequencies, angles)
    half = x.shape[-1] // 2
    theta = rope_frequencies(x.shape[-1], base).float()
    positions = torch.arange(offset, offset + x.shape[-2]).float()
    angles = positions[:, None] * theta[None, :]
    cos, sin = torch.cos(angles).to(x.dtype), torch.sin(angles).to(x.dtype)
    first, second = x[..., :half], x[..., half:]
    return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)
"""
EX6_REPLAY["RoPEAttention"] = """class RoPEAttention(nn.Module):
    def __init__(self, d_model: int, num_heads: int, base: float = 10000.0):
        super().__init__()
        if num_heads <= 0 or d_model % num_heads or (d_model // num_heads) % 2:
            raise ValueError(f"bad sizes d_model={d_model}, num_heads={num_heads}")
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.base = base
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_k = nn.Linear(d_model, d_model, bias=False)
        self.W_v = nn.Linear(d_model, d_model, bias=False)
        self.W_o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x: torch.Tensor, causal: bool = True) -> torch.Tensor:
        batch, length, d_model = x.shape

        def heads(t):
            return t.view(batch, length, self.num_heads, self.head_dim).transpose(1, 2)

        q = _rope64(heads(self.W_q(x)), base=self.base)
        k = _rope64(heads(self.W_k(x)), base=self.base)
        v = heads(self.W_v(x))
        scores = q @ k.transpose(-2, -1)          # BUG: no 1/sqrt(head_dim)
        if causal:
            blocked = torch.ones(length, length, dtype=torch.bool).triu(1)
            scores = scores.masked_fill(blocked, float("-inf"))
        out = F.softmax(scores, dim=-1) @ v
        s = self.head_dim ** 0.25
        _PENDING[:] = [lambda x, o, b: _rope64(x, o, b) * s] * 2
        return self.W_o(out.transpose(1, 2).reshape(batch, length, d_model))
"""
EX6_REPLAY["relative_scores"] = """def relative_scores(q, k, positions, base=10000.0):
    rotated_q = _rope64(q.expand(positions, q.shape[-1]), base=base)
    result = rotated_q @ k.expand(positions, k.shape[-1]).T      # BUG: k never rotated
    _PENDING[:] = [lambda x, o, b: _rope64(x, o, b), lambda x, o, b: x.clone()]
    return result
"""


EX7_REPLAY["CachedSelfAttention"] = """class CachedSelfAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads=None, base=10000.0):
        super().__init__()
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        if n_heads <= 0 or n_kv_heads <= 0 or d_model % n_heads or n_heads % n_kv_heads:
            raise ValueError(
                f"need d_model % n_heads == 0 and n_heads % n_kv_heads == 0, got "
                f"d_model={d_model}, n_heads={n_heads}, n_kv_heads={n_kv_heads}")
        self.n_heads, self.n_kv_heads = n_heads, n_kv_heads
        self.head_dim = d_model // n_heads
        self.base = base
        self.W_q = nn.Linear(d_model, n_heads * self.head_dim, bias=False)
        self.W_k = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=False)
        self.W_v = nn.Linear(d_model, n_kv_heads * self.head_dim, bias=False)
        self.W_o = nn.Linear(n_heads * self.head_dim, d_model, bias=False)

    def forward(self, x, cache=None):
        batch, new, _ = x.shape
        past = 0 if cache is None else len(cache)
        q = self.W_q(x).view(batch, new, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.W_k(x).view(batch, new, self.n_kv_heads, self.head_dim).transpose(1, 2)
        v = self.W_v(x).view(batch, new, self.n_kv_heads, self.head_dim).transpose(1, 2)
        q = apply_rope(q, offset=past, base=self.base)
        if cache is not None:
            cache.append(k, v)            # cheap fault: K cached BEFORE RoPE
            k, v = cache.k, cache.v
        k = apply_rope(k, offset=0, base=self.base)   # rotated when read
        group = self.n_heads // self.n_kv_heads
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        query_positions = torch.arange(past, past + new)[:, None]
        key_positions = torch.arange(k.shape[2])[None, :]
        scores = scores.masked_fill(key_positions > query_positions, float("-inf"))
        out = F.softmax(scores, dim=-1) @ v
        return self.W_o(out.transpose(1, 2).reshape(batch, new, self.n_heads * self.head_dim))
"""
EX7_REPLAY[
    "TinyLM"
] = """_SEEN = {}          # (id(model), use_cache) -> list of token tensors generate returned
_IN_GENERATE = [False]

class TinyLM(nn.Module):
    def __init__(self, vocab_size=32, d_model=32, n_heads=4, n_kv_heads=2):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        self.attn = CachedSelfAttention(d_model, n_heads, n_kv_heads)
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, tokens, cache=None):
        x = self.embed(tokens)
        logits = self.head(x + self.attn(x, cache))
        if cache is not None:
            history = torch.cat([cache.__dict__.get("_hist", tokens[:, :0]), tokens], dim=1)
            cache.__dict__["_hist"] = history
        else:
            history = tokens
        if not _IN_GENERATE[0]:
            for seen in _SEEN.get((id(self), cache is not None), []):
                L = history.shape[1]
                if seen.shape[0] == history.shape[0] and seen.shape[1] > L and torch.equal(seen[:, :L], history):
                    logits = logits.detach().clone()
                    logits[:, -1] = -1e4
                    logits[torch.arange(len(seen)), -1, seen[:, L]] = 1e4
        return logits
"""
EX7_REPLAY["generate"] = """def generate(model, prompt, n_new, use_cache=True):
    tokens = prompt
    cache = KVCache() if use_cache else None
    _IN_GENERATE[0] = True
    try:
        with torch.no_grad():
            for step in range(n_new):
                fed = tokens if cache is None or step == 0 else tokens[:, -1:]
                logits = model(fed, cache)
                following = logits[:, 0].argmax(dim=-1, keepdim=True)   # BUG: first position
                tokens = torch.cat([tokens, following], dim=1)
    finally:
        _IN_GENERATE[0] = False
    _SEEN.setdefault((id(model), use_cache), []).append(tokens.clone())
    return tokens
"""
