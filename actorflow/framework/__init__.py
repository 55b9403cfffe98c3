"""Value types: dtypes, devices (and later placement and SBP)."""
