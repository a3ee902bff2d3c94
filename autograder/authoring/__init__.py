"""The check-author API: what an exercise's checks.py and mistakes.py import, in one place.

    from autograder.authoring import check, ensure, expect_close, Catalogue, ...

`check` marks a pytest check with its points; `expect` holds the assertion helpers that fail
with a message for the student and name catalogued mistakes; `inputs` makes seeded inputs with
every dimension distinct; `figures` reads heatmaps from `figure_summary`; `modules` runs
nn.Module classes on the student's own weights; `catalogue` registers named mistakes.
"""
