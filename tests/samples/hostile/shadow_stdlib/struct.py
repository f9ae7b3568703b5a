raise SystemExit('shadow struct imported: the evaluator would use it')
