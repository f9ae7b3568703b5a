raise SystemExit('shadow copyreg imported: the evaluator would use it')
