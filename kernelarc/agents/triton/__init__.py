"""Triton kernels as source text: the template library, its agent, and the knob spaces over it.

Place in the flow: `TritonTemplateAgent` (`template_agent.py`, kind `triton_template`) walks the
knob grid of the template that fits a problem. The library (`template_library.py`, the texts in
`templates/*.py.txt`, package data) picks that template with `template_matchers.py` and renders
it; `template_knobs.py` and `generated_space.py` turn the templates and the kernel generator
(`kernelarc.kernelgen`) into the `KnobSpace`s the strategy agents (`kernelarc.agents.strategy`)
search. Nothing here imports torch or triton: candidates run in the sandbox.
"""

from kernelarc.agents.triton.template_agent import TritonTemplateAgent

__all__ = ["TritonTemplateAgent"]
