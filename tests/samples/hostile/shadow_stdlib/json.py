raise SystemExit('shadow json imported: the evaluator would use it')
