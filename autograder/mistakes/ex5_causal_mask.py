"""Named mistakes of ex5_causal_mask."""

from autograder.mistakes import Catalogue

CATALOGUE = Catalogue("ex5_causal_mask")
