raise SystemExit('shadow statistics imported: the evaluator would use it')
