"""Build student notebooks from templates + reference solutions, and the nbgrader course."""
