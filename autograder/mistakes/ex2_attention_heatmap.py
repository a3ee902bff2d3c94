"""Named mistakes of ex2_attention_heatmap."""

from autograder.mistakes import Catalogue

CATALOGUE = Catalogue("ex2_attention_heatmap")
