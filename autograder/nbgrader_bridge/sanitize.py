"""Student-written HTML never reaches a page as markup: the autograded notebook (which both
`nbgrader generate_feedback` and formgrader render, with templates that do not sanitize
markdown) has its markdown and raw cells cleaned by nbconvert's SanitizeHTML (bleach)."""

from __future__ import annotations

from nbconvert.preprocessors.sanitize import SanitizeHTML
from traitlets import Bool


class SanitizeStudentHTML(SanitizeHTML):
    """nbconvert's SanitizeHTML, enabled, for every markdown and raw cell that holds a `<`
    (markup needs one; cells without it are left byte-identical, so their markdown and math
    render as written) and for every output that is not plain text or an image."""

    enabled = Bool(True).tag(config=True)

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type in ("markdown", "raw") and "<" not in str(cell.source):
            return cell, resources
        return super().preprocess_cell(cell, resources, cell_index)
