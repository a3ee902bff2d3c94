"""Mutation testing of the checks: mechanical one-change variants of a reference solution.

Every mutant is a copy of one function or class of an exercise's reference with one change a
student could make (an axis, an off-by-one, two arguments swapped, a scaling or a term dropped,
a dtype, a comparison or a mask flipped, argmax for argmin, a transpose dropped). Graded as a
submission, a mutant should lose points; one that keeps them all either behaves identically
under the contract (equivalent: say why) or shows an input class the checks never draw.

    from autograder.authoring.mutants import mutants_of
    for mutant in mutants_of("ex1_numpy_attention"): ...

benchmarks/mutation.py grades them all and prints the table; a sample runs in the suite.
"""

from __future__ import annotations

import ast
import copy
import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from autograder.exercises import reference_module
from autograder.notebooks.solutions import public_names

AXIS_KEYWORDS = ("axis", "dim", "dim0", "dim1", "axis1", "axis2")
SWAPPED_OPERATORS: dict[type, type] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Div,
    ast.Pow: ast.Mult,
}
FLIPPED_COMPARISONS: dict[type, type] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
}
RENAMED_ATTRIBUTES = {
    "float64": "float32",
    "argmax": "argmin",
    "tril": "triu",
    "triu": "tril",
    "max": "min",
    "sum": "mean",
    "mean": "sum",
    "repeat_interleave": "repeat",
}

# "exercise target:line:start-end:operator" -> why it behaves identically under the contract
# Survivors argued equivalent: behaviour identical under the contract (what it observes).
EQUIVALENT: dict[str, str] = {
    "ex1_numpy_attention score_variance:9:18-23:drop_term": (
        "np.sum(q, axis=1) for np.sum(q * k, axis=1): for q, k ~ N(0, I) the sum of q's d_k "
        "entries has variance d_k, like q·k, and divided by √d_k variance 1: the two returned "
        "numbers have the same distribution, and they are all the contract observes"
    ),
    **{
        f"ex2_attention_heatmap MultiHeadAttention:10:{span}": (
            "num_heads < 0 for num_heads <= 0: the contract asks for ValueError only when "
            "d_model is not divisible by num_heads; num_heads = 0 is outside it (either way "
            "the call fails)"
        )
        for span in ("11-25:comparison",)
    },
    **{
        f"ex2_attention_heatmap plot_attention:{where}": (
            "the figure's size or the ticks' angle: presentation the contract leaves to the "
            "student (it fixes the cells, one tick per token at the cell centres, the labels "
            "and a colorbar)"
        )
        for where in (
            "4:11-34:drop_term",
            "4:17-34:operator",
            "4:17-34:drop_term",
            "5:29-39:operator",
            "5:29-39:drop_term",
            "9:55-57:off_by_one",
        )
    },
    **{
        f"ex4_gqa_analysis GroupedQueryAttention:10:{span}": (
            "n_heads < 0 (or n_kv_heads < 0) for <= 0: the contract asks for ValueError when "
            "d_model % n_heads or n_heads % n_kv_heads is not 0; zero heads is outside it"
        )
        for span in ("11-23:comparison", "27-42:comparison")
    },
    **{
        f"ex4_gqa_analysis GroupedQueryAttention:{where}": (
            "nn.Linear(n_heads * head_dim, d_model) for nn.Linear(d_model, n_heads * head_dim) "
            "(and back for W_o): the contract requires d_model % n_heads == 0, so n_heads * "
            "head_dim == d_model and the two are the same layer"
        )
        for where in ("18:19-74:swap_args", "21:19-74:swap_args")
    },
    "ex4_gqa_analysis kv_cache_mib:11:8-94:swap_args": (
        "seq_len and n_kv_heads swapped in the call of kv_cache_bytes: they are only multiplied, "
        "so the result is the same for every input"
    ),
    "ex4_gqa_analysis gqa_report:28:32-75:swap_args": (
        "seq_len and n_kv_heads swapped in the call of kv_cache_mib: they are only multiplied, "
        "so every reported number is the same"
    ),
    **{
        key: (
            "zero heads (or a zero head_dim) is outside the contract, which asks for ValueError "
            "only on divisibility and odd sizes; an odd head_dim of 1 fails the parity test anyway"
        )
        for key in (
            "ex6_rope rope_frequencies:6:7-20:comparison",
            "ex6_rope rope_frequencies:6:19-20:off_by_one",
            "ex6_rope RoPEAttention:9:11-25:comparison",
            "ex7_kv_cache CachedSelfAttention:14:11-23:comparison",
            "ex7_kv_cache CachedSelfAttention:14:27-42:comparison",
        )
    },
    "ex6_rope RoPEAttention:9:53-73:operator": (
        "d_model / num_heads % 2 for d_model // num_heads % 2: evaluated only when d_model is a "
        "multiple of num_heads, where both are the same number"
    ),
    **{
        f"ex7_kv_cache CachedSelfAttention:{where}": (
            "nn.Linear(n_heads * head_dim, d_model) for nn.Linear(d_model, n_heads * head_dim) "
            "(and back for W_o): d_model == n_heads * head_dim under the contract, the same layer"
        )
        for where in ("23:19-74:swap_args", "26:19-74:swap_args")
    },
    **{
        f"ex7_kv_cache kv_projections:{where}": (
            "the answer for n_new = 0 changed: there the contract's two descriptions part (its "
            "cached formula prompt_len + n_new - 1 gives prompt_len - 1, while `generate` makes no "
            "pass at all), so either answer follows the contract and the checks draw n_new >= 1"
        )
        for where in ("3:7-17:comparison", "4:15-16:off_by_one")
    },
    "ex8_additive_attention make_pointer_task:9:14-53:rename": (
        "the mean of the products over the features for their sum, before the argmax: dividing "
        "every score by the same positive number keeps the argmax, so the targets are the same"
    ),
    "ex3_transformer_classifier make_mean_dataset:9:22-23:off_by_one": (
        "tokens drawn from [1, vocab_size) instead of [0, vocab_size): still integers in "
        "[0, vocab_size) with the labels of their means, which is all the contract asks (it "
        "leaves the generator and its distribution to the student)"
    ),
    **{
        f"ex3_transformer_classifier PositionalEncoding:{where}": (
            "the sinusoid table computed in float32 instead of float64 (it is stored in float32 "
            "either way): at position 511 its values move by about 3e-5, inside the checks' "
            "float32 tolerance; the lesson's own code computes it in float32, and the contract "
            "fixes the formula, not the precision of its computation"
        )
        for where in ("11:47-60:rename", "12:53-66:rename", "14:49-62:rename")
    },
    **{
        f"ex5_causal_mask {where}": "max(0, n) for max(n, 0): max is symmetric, the same value"
        for where in ("make_windows:9:16-49:swap_args", "split_holdout:13:45-76:swap_args")
    },
    "ex5_causal_mask make_windows:9:47-48:off_by_one": (
        "at least one window when the tokens hold none (len(tokens) <= context_len): the checks "
        "draw at least one window, since a natural correct solution (torch.stack of a list of "
        "windows) raises on none; every answer with a window is unchanged"
    ),
    **{
        f"ex5_causal_mask CausalTransformer:{where}": (
            "another feed-forward width in the encoder layers: the contract fixes the "
            "constructor, the shapes and causality, not the feed-forward size"
        )
        for where in ("22:28-39:drop_term", "22:28-29:off_by_one")
    },
    "ex5_causal_mask CausalTransformer:35:12-55:operator": (
        "token embedding minus the learned position embedding: a learned embedding's sign is "
        "arbitrary (-E is another learned embedding), so the model class is the same"
    ),
    "ex5_causal_mask CausalTransformer:35:12-55:drop_term": (
        "no position embedding: the contract asks for (B, T, vocab) logits that depend only on "
        "the tokens up to t, not for positions (a causal mask alone carries order), and the "
        "model still learns the sine past the threshold"
    ),
    "ex4_gqa_analysis gqa_report:12:15-33:operator": (
        "d_model / n_heads for d_model // n_heads: d_model is a multiple of n_heads (the "
        "contract), so head_dim has the same value, and it is only multiplied into a MiB figure "
        "that is a float either way"
    ),
}


@dataclass(frozen=True)
class Mutant:
    exercise: str
    target: str  # the function or class (its solution cell's grade id)
    operator: str  # "axis", "off_by_one", "swap_args", "drop_term", ...
    where: str  # the changed line of the original, shortened
    line: int  # of the change, within the target's source
    span: str  # "start-end" columns of the changed node (two changes on one line differ by it)
    source: str  # the mutated target, as a solution cell's code

    @property
    def id(self) -> str:
        return f"{self.target}:{self.line}:{self.span}:{self.operator}"


# A change mutates (a copy of) the node in place and returns None, or returns a replacement.
Change = Callable[[Any], Any]


def _changes(node: ast.AST) -> Iterator[tuple[str, Change]]:
    """(operator, change) for each mutation that applies at `node`; a change mutates a copy of
    the node in place, or returns a replacement."""
    if isinstance(node, ast.keyword) and node.arg in AXIS_KEYWORDS:
        if isinstance(node.value, ast.Constant | ast.UnaryOp):
            yield "axis", lambda n: setattr(n, "value", _shifted_axis(n.value))
    if isinstance(node, ast.Constant) and type(node.value) is int and abs(node.value) < 10**6:
        yield "off_by_one", lambda n: setattr(n, "value", n.value + 1)
    if isinstance(node, ast.BinOp) and type(node.op) in SWAPPED_OPERATORS:
        yield "operator", lambda n: setattr(n, "op", SWAPPED_OPERATORS[type(n.op)]())
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div | ast.Mult | ast.Add | ast.Sub):
        yield "drop_term", lambda n: n.left
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        if type(node.ops[0]) in FLIPPED_COMPARISONS:
            yield "comparison", lambda n: setattr(n, "ops", [FLIPPED_COMPARISONS[type(n.ops[0])]()])
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not | ast.Invert):
        yield "polarity", lambda n: n.operand
    if isinstance(node, ast.Call) and len(node.args) >= 2 and not _commutes(node):
        yield "swap_args", lambda n: setattr(n, "args", [n.args[1], n.args[0], *n.args[2:]])
    if isinstance(node, ast.Attribute) and node.attr in RENAMED_ATTRIBUTES:
        yield "rename", lambda n: setattr(n, "attr", RENAMED_ATTRIBUTES[n.attr])
    if isinstance(node, ast.Attribute) and node.attr in ("T", "mT"):
        yield "transpose", lambda n: n.value
    if isinstance(node, ast.Slice):
        for part in ("lower", "upper"):
            if getattr(node, part) is not None:
                yield f"slice_{part}", _plus_one(part)
    if isinstance(node, ast.BoolOp):
        yield (
            "bool_op",
            lambda n: setattr(n, "op", ast.Or() if isinstance(n.op, ast.And) else ast.And()),
        )


def _plus_one(part: str) -> Change:
    def change(node: Any) -> None:
        setattr(node, part, ast.BinOp(getattr(node, part), ast.Add(), ast.Constant(1)))

    return change


def _shifted_axis(value: ast.expr) -> ast.expr:
    if isinstance(value, ast.Constant) and isinstance(value.value, int):
        return ast.Constant(
            value.value - 1
            if value.value >= 1
            else value.value + 1
            if value.value < -1
            else 0
            if value.value == -1
            else 1
        )
    return ast.BinOp(value, ast.Sub(), ast.Constant(1))


# calls whose first two arguments commute by definition (transpose(1, 2) is transpose(2, 1)):
# swapping them is no mutation
SYMMETRIC_CALLS = {"transpose", "swapaxes", "swapdims", "maximum", "minimum"}


def _commutes(call: ast.Call) -> bool:
    """Swapping the call's first two arguments changes nothing: they are the same expression,
    or the function is symmetric in them."""
    name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
    return name in SYMMETRIC_CALLS or ast.dump(call.args[0]) == ast.dump(call.args[1])


def _skipped(node: ast.AST) -> bool:
    """Docstrings and error messages are not behaviour worth mutating; nor are signatures
    (the defaults and annotations): the stub gives them, students fill in the body."""
    return isinstance(node, ast.JoinedStr | ast.Raise | ast.arguments) or (
        isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    )


def _nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node of `tree` in a fixed order, without what _skipped leaves out."""
    stack = [tree]
    while stack:
        node = stack.pop(0)
        if _skipped(node):
            continue
        yield node
        stack[0:0] = list(ast.iter_child_nodes(node))


def _mutated(tree: ast.AST, index: int, change: Change) -> ast.AST | None:
    clone = copy.deepcopy(tree)
    target = list(_nodes(clone))[index]
    replacement = change(target)
    if replacement is None:
        return ast.fix_missing_locations(clone)
    for parent in ast.walk(clone):
        for field, value in ast.iter_fields(parent):
            if value is target:
                setattr(parent, field, replacement)
                return ast.fix_missing_locations(clone)
            if isinstance(value, list) and any(item is target for item in value):
                setattr(parent, field, [replacement if item is target else item for item in value])
                return ast.fix_missing_locations(clone)
    return None


def mutants_of(exercise: str, targets: tuple[str, ...] | None = None) -> list[Mutant]:
    """Every one-change mutant of the exercise's reference functions and classes (or `targets`),
    in a fixed order; mutants whose code does not change behaviour textually are left out."""
    module = reference_module(exercise)
    found = []
    for name in targets or public_names(module):
        original = inspect.getsource(getattr(module, name))
        tree = ast.parse(original)
        baseline = ast.unparse(tree)
        lines = original.splitlines()
        for index, node in enumerate(list(_nodes(tree))):
            for operator, change in _changes(node):
                mutated = _mutated(tree, index, change)
                if mutated is None:
                    continue
                try:
                    source = ast.unparse(mutated)
                    compile(source, f"<mutant {name}>", "exec")
                except (SyntaxError, ValueError, TypeError, AttributeError):
                    continue
                if source == baseline:
                    continue
                line = getattr(node, "lineno", 1)
                span = f"{getattr(node, 'col_offset', 0)}-{getattr(node, 'end_col_offset', 0)}"
                where = lines[line - 1].strip()[:80] if 0 < line <= len(lines) else ""
                found.append(Mutant(exercise, name, operator, where, line, span, source))
    unique: dict[str, Mutant] = {}
    for mutant in found:
        unique.setdefault(f"{mutant.target}\n{mutant.source}", mutant)
    return list(unique.values())
