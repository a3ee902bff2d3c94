"""`attn-grade`: argparse, rendering and exit codes only; the work is in the other packages."""
