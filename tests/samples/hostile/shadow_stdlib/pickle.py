raise SystemExit('shadow pickle imported: the evaluator would use it')
