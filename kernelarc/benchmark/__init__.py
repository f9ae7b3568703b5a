"""The offline campaign benchmark (docs/benchmarks.md): runs in campaigns.py, table in report.py."""
