raise SystemExit("shadow sol_execbench imported")
