raise SystemExit("shadow kernelarc imported: the evaluator would be ours")
