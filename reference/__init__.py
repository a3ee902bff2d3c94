"""The hidden reference solutions, one module per exercise: `reference/<id>.py`.

Hidden like the checks: never sent into the child, masked in the jail, locked in CI bundles.
Imported as `autograder._reference.<id>` (`autograder/_reference` links here; a wheel carries
the files there), so that a site-packages never gains a top-level `reference` package.
"""
