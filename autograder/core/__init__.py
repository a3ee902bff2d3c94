"""The shared vocabulary: errors (one tree), Status, results, versions, safe text."""
