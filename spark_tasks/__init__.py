"""Spark jobs: one module per job, plus session.py, the only place that builds a SparkSession."""
