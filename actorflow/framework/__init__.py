"""Value types: dtypes and devices."""
