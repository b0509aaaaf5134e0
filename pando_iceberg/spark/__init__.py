"""The Spark side of pando-iceberg: session factory, sampling, routing, rewrite, pruned reads."""
