"""What a sandbox adds to a request before its runner reads it: the limits the judge must know.

Place in the flow: `LocalSandbox.evaluate` and `DockerSandbox.evaluate` pass every request
through `runner_request` just before writing it for the runner. The overall timeout goes in so
that the judge ends a hung workload, and reports it, before the sandbox kills the runner.
"""

from kernelarc.schema import EvalRequest


def runner_request(request: EvalRequest, timeout_s: float) -> EvalRequest:
    """`request` as the runner gets it: `overall_timeout_s` at most the sandbox's `timeout_s`."""
    overall = request.overall_timeout_s
    if overall is not None and overall <= timeout_s:
        return request
    return request.model_copy(update={"overall_timeout_s": timeout_s})
