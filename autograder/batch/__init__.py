"""`attn-grade autograde`: a course's submissions graded in parallel (pool, workers, resume,
Dask)."""
