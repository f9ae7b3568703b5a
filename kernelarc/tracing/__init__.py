"""Tracing a reference into an operator graph (imports torch; run as `python -m kernelarc.tracing`).

Place in the flow: the host asks `kernelarc.kernelgen.traces.load_traces` for a problem's graphs,
which runs this package in a subprocess and caches the JSON; nothing on the host imports it.
"""
