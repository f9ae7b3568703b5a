raise SystemExit('shadow numpy imported')
