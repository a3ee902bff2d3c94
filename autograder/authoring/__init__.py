"""The check-author API: what an exercise's checks.py and mistakes.py import, in one line.

    from autograder.authoring import call_checked, check, distinct_sizes, ensure, expect_close

A first check needs those five names: `check` marks a pytest test with its points and grade
cell; `distinct_sizes` draws seeded sizes with every dimension distinct (from the `rng`
fixture); `call_checked` calls the student's function through the `submission` fixture and
runs the catalogued mistakes (the `mistakes` fixture) on the same inputs; `expect_close`
compares the answer with the reference's, naming the mistake it matches; `ensure` fails with a
message for the student. mistakes.py needs one more, `Catalogue`. The rest: more assertions
(`expect_*`, `fail`, `within`, `close`, `as_array`), inputs (`random_bool_mask`,
`mask_hiding`), nn.Module helpers run on the student's own weights (`module_output`,
`load_into`, ...), `figures` for heatmaps, checks built on upstream functions
(`on_the_contracts`, `set_aside`), and the outcomes a check raises or catches (`CheckFailed`,
`StudentError`). The modules by theme: `marking`, `expect`, `inputs`, `modules`, `figures`,
`upstream`, `catalogue`.
"""

from autograder.authoring import figures
from autograder.authoring.catalogue import Catalogue, Mistake, Raised, catalogue_for
from autograder.authoring.expect import (
    Answer,
    as_array,
    call_checked,
    close,
    distinguish,
    ensure,
    equal_mistake,
    expect_close,
    expect_equal,
    expect_number,
    expect_raises,
    expect_rows_sum_to_one,
    expect_shape,
    expect_tuple,
    fail,
    is_int,
    is_real,
    is_tensor,
    matching_mistake,
    within,
)
from autograder.authoring.inputs import distinct_sizes, mask_hiding, random_bool_mask
from autograder.authoring.marking import check
from autograder.authoring.modules import (
    TRAINING_SECONDS,
    call_evaluating,
    expect_batches,
    expect_evaluated,
    expect_weights_changed,
    load_into,
    module_output,
    module_outputs,
    parameter_count,
    student_output,
    trainable_parameters,
    trained_in_batches,
    weights_of,
    without_raised,
)
from autograder.authoring.upstream import UNUSABLE, on_the_contracts, set_aside
from autograder.core.errors import CheckFailed, StudentError
from autograder.grading.source import functions_using
from autograder.grading.submission import Handle, Submission

__all__ = [
    "TRAINING_SECONDS",
    "UNUSABLE",
    "Answer",
    "Catalogue",
    "CheckFailed",
    "Handle",
    "Mistake",
    "Raised",
    "StudentError",
    "Submission",
    "as_array",
    "call_checked",
    "call_evaluating",
    "catalogue_for",
    "check",
    "close",
    "distinct_sizes",
    "distinguish",
    "ensure",
    "equal_mistake",
    "expect_batches",
    "expect_close",
    "expect_equal",
    "expect_evaluated",
    "expect_number",
    "expect_raises",
    "expect_rows_sum_to_one",
    "expect_shape",
    "expect_tuple",
    "expect_weights_changed",
    "fail",
    "figures",
    "functions_using",
    "is_int",
    "is_real",
    "is_tensor",
    "load_into",
    "mask_hiding",
    "matching_mistake",
    "module_output",
    "module_outputs",
    "on_the_contracts",
    "parameter_count",
    "random_bool_mask",
    "set_aside",
    "student_output",
    "trainable_parameters",
    "trained_in_batches",
    "weights_of",
    "within",
    "without_raised",
]
