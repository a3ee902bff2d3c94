# nbgrader configuration of this course: yours to edit. `attn-grade build` never rewrites it.
# The course's generated settings (our preprocessors, course id, exchange) are loaded first,
# from attn_grade_config.py; whatever you set below wins, e.g.:
#   c.LateSubmissionPlugin.penalty_method = "zero"
#   c.ZipCollectApp.archive_directory = "downloaded"
c = get_config()  # noqa: F821
load_subconfig("attn_grade_config.py")  # noqa: F821
