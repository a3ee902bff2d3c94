"""Grade one notebook: load it, run it in a sandbox, run the exercise's checks in the parent."""
