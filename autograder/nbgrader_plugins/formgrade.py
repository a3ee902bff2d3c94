"""Formgrader's grading page for this course: nbgrader's page (its template `formgrade`, its
scripts and form fields unchanged) extended by templates/attn_formgrade, set in the course config
(attn_grade_config.py: `c.HTMLExporter.update(FORMGRADER_PAGE)`; formgrader loads the course's
config after its own settings).

What it changes, for the instructor who grades there:
- math as MathML, as on the feedback page (RenderMathOffline): nothing loads MathJax from a CDN,
  and math renders offline ($$...$$ stayed raw on a machine without the internet);
- the report table's narrow columns keep whole words ("통과", not "통/과": the feedback page's
  CSS, templates/attn_common/pages.css, reaches formgrader too);
- the page's language (`lang`: formgrader's words English, the notebook's own), labelled score
  fields, a navigation list that is a list, colours and links that meet WCAG 2 AA.
The course config sets HTMLExporter, which GenerateFeedback's FeedbackExporter inherits too:
it sets its own template over it, and RenderMathOffline twice leaves the same page.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

TEMPLATES = Path(__file__).with_name("templates")


def nbgrader_templates() -> str:
    """nbgrader's formgrader templates folder (found without importing formgrader: the course
    config is read by every nbgrader command)."""
    spec = importlib.util.find_spec("nbgrader")
    assert spec and spec.submodule_search_locations, "nbgrader is not installed"
    root = Path(next(iter(spec.submodule_search_locations)))
    return str(root / "server_extensions" / "formgrader" / "templates")


FORMGRADER_PAGE = {
    "template_name": "attn_formgrade",
    # ours first, then nbgrader's; whole folders for 'formgrade/index.html.j2' (which ours
    # extends) and 'attn_common/pages.css' (which it includes)
    "extra_template_basedirs": [str(TEMPLATES), nbgrader_templates()],
    "extra_template_paths": [str(TEMPLATES), nbgrader_templates()],
    "exclude_anchor_links": True,  # a "¶" link in every heading, unlabelled
    "preprocessors": ["autograder.nbgrader_plugins.feedback.RenderMathOffline"],
    "filters": {"attn_lang": "autograder.nbgrader_plugins.page_text.language"},
}
