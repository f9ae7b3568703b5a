raise SystemExit('shadow random imported: the evaluator would use it')
