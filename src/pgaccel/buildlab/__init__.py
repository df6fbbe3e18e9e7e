"""Building PostgreSQL from source: sources, flavors, the build cache."""
