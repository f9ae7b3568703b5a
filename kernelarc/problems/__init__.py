"""Problems: SOL-ExecBench problem dirs on disk and the built-in problem set."""
