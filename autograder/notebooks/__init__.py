"""Template text <-> notebook cells: rendering, the reference's solution cells, nbformat output."""
