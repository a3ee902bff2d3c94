"""`attn-grade report`: what the instructor learns from a batch, as one self-contained page."""
