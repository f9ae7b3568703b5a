"""The offline campaign benchmark (docs/benchmarks.md): runs in campaigns.py, the torch.compile
baselines in baselines.py, what was asked in settings.py, results and bench.json/bench.md in
outputs.py, the table in report.py, the suite's files in suite.py."""
