"""Hidden reference solutions, one module per exercise (never released to students).

Conventions the notebook build relies on (see autograder/build/solutions.py):
- imports at the top of the module become the notebook's setup cell;
- every public function/class is one solution cell: its signature and docstring are shown to
  students, its body (each method's body, for a class) is the hidden solution;
- bodies are self-contained: no private module-level helpers, classes have only the methods
  of the contract.
"""
