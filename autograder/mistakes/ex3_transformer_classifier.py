"""Named mistakes of ex3_transformer_classifier."""

from autograder.mistakes import Catalogue

CATALOGUE = Catalogue("ex3_transformer_classifier")
