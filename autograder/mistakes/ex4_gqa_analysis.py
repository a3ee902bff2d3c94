"""Named mistakes of ex4_gqa_analysis."""

from autograder.mistakes import Catalogue

CATALOGUE = Catalogue("ex4_gqa_analysis")
