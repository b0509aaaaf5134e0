"""pando-iceberg: Pando learned multi-tree layouts for Apache Iceberg."""
__version__ = "0.1.0"
