"""Ablation reports: per-arm statistics, credit and plots from campaign runs.

Place in the flow: `kernelarc report` loads campaigns from run dirs and/or MLflow experiments
(`report.inputs`), groups them into arms (`report.arms`: the swept overrides minus the seed),
computes per-arm statistics and credit (`report.stats`, pure), draws plots (`report.plots`) and
writes a self-contained HTML page (`report.html_page`) with `report.build`. `report.sol_score`
scores attempts for the report and for the tracker's `eval/sol_score` metric.
"""
