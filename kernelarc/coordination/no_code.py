"""The no-code rule of the shared memory: a conclusion's claim is prose, never code.

Place in the flow: `ConclusionBoard.publish` calls `code_reasons` on every claim before it is
accepted; any reason rejects the draft. Agents learn from each other's findings, not by copying
each other's kernels, so the check errs on the side of rejecting. It normalises the text first
(Unicode NFKC, format characters such as zero-width spaces dropped) so look-alike characters do
not slip code past it, then applies, in order: fences and code-bearing backtick spans; markers of
Triton, CUDA, C++ and Python (`def `, `@triton`, `tl.`, `__global__`, `#include`, `import x`);
braces and semicolons; call syntax (`torch.compile(...)`, `f(x, y)`); symbol density; and, per
line, whether the line parses as a Python statement other than a bare name, constant or
`a and b`-style prose fragment.
"""

import ast
import re
import unicodedata

from kernelarc.python_ast import parse_module

#: Identifiers, dotted names or `NAME=value` inside backticks are prose (`num_warps`, `BLOCK_H=64`).
_PLAIN_SPAN = re.compile(r"[A-Za-z_][\w.]*(\s*=\s*[\w.+-]+)?")
_BACKTICK_SPAN = re.compile(r"`([^`]*)`")

_MARKERS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("a Python definition (`def`/`class`/`lambda`)", re.compile(r"\b(def|class)\s+\w+\s*[(:]")),
    ("a lambda", re.compile(r"\blambda\b[^:]*:")),
    ("an import statement", re.compile(r"^\s*(import\s+\w|from\s+[\w.]+\s+import\b)", re.M)),
    ("a decorator", re.compile(r"@\s*[A-Za-z_]\w*\s*\.\s*\w|^\s*@[A-Za-z_]", re.M)),
    ("Triton language calls (`tl.`)", re.compile(r"\btl\s*\.\s*\w")),
    ("a Triton API path (`triton.`)", re.compile(r"\btriton\s*\.\s*(jit|language|autotune|cdiv)")),
    (
        "CUDA C++ (`__global__`, `__device__`, `__shared__`, thread indices, launch syntax)",
        re.compile(
            r"__(global|device|shared|host|syncthreads|restrict)__|\b(threadIdx|blockIdx|blockDim"
            r"|gridDim)\b|<<<|>>>|\bcuda(Malloc|Memcpy|Launch)\w*"
        ),
    ),
    ("a preprocessor line", re.compile(r"(^|\s)#\s*(include|define|pragma|if|ifdef)\b")),
    ("indexing (`a[i]`)", re.compile(r"\b[A-Za-z_]\w*\[[^\]]*\]")),
    ("a compound assignment (`+=`)", re.compile(r"[\w\]]\s*(\+|-|\*|/|%|&|\||\^|<<|>>)=")),
    (
        "an assignment of an expression",
        re.compile(r"\b[A-Za-z_]\w*\s*=(?!=)\s*[\w.]+\s*([-+*/%&|@^]|\*\*)\s*[\w(]"),
    ),
    (
        "C/C++ declarations",
        re.compile(r"\b(template\s*<|static_cast|reinterpret_cast|void\s+\w+\s*\()"),
    ),
    ("inline assembly", re.compile(r"\basm\s*(volatile)?\s*\(")),
)

#: `name.attr(...)` or `name(args with , or =)` or `name()`: a call written as code.
_CALL = re.compile(r"\b[A-Za-z_]\w*(\s*\.\s*\w+)+\s*\(|\b[A-Za-z_]\w*\((\)|[^)]*[,=])")
_SYMBOLS = frozenset("=;{}[]<>*&|^\\~")
_MAX_SYMBOL_SHARE = 0.12
_MAX_LINES = 4

#: Expression nodes that make a parsed line code, not prose.
_CODE_EXPR = (
    ast.Call,
    ast.Subscript,
    ast.Lambda,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
    ast.Await,
    ast.Yield,
    ast.YieldFrom,
    ast.NamedExpr,
    ast.Starred,
    ast.Dict,
    ast.Set,
    ast.List,
)


def normalize_claim(text: str) -> str:
    """NFKC-normalise and drop format characters (zero-width spaces, bidi controls)."""
    folded = unicodedata.normalize("NFKC", text)
    return "".join(ch for ch in folded if unicodedata.category(ch) != "Cf").strip()


def code_reasons(text: str) -> list[str]:
    """Why `text` contains code; [] when it reads as prose.

    Args:
        text: a conclusion's claim as submitted.

    Returns:
        One line per rule that matched, in rule order.
    """
    claim = normalize_claim(text)
    reasons: list[str] = []
    if "```" in claim or "~~~" in claim:
        reasons.append("a code fence")
    for span in _BACKTICK_SPAN.findall(claim):
        if not _PLAIN_SPAN.fullmatch(span.strip()):
            reasons.append(f"code in backticks: `{span[:40]}`")
            break
    prose = _BACKTICK_SPAN.sub(lambda m: m.group(1), claim)
    reasons.extend(label for label, pattern in _MARKERS if pattern.search(prose))
    if "{" in prose or "}" in prose:
        reasons.append("braces")
    if prose.count(";") >= 2 or re.search(r";\s*($|\n)", prose):
        reasons.append("statement-ending semicolons")
    if _CALL.search(prose):
        reasons.append("a function call")
    symbols = sum(1 for ch in prose if ch in _SYMBOLS)
    if prose and symbols / len(prose) > _MAX_SYMBOL_SHARE:
        reasons.append(f"symbol-heavy text ({symbols} of {len(prose)} characters)")
    lines = [line for line in prose.splitlines() if line.strip()]
    if len(lines) > _MAX_LINES:
        reasons.append(f"{len(lines)} lines (a claim is one or two sentences)")
    statement = next((line for line in lines if _parses_as_code(line)), None)
    if statement is not None:
        reasons.append(f"a line that parses as a Python statement: {statement.strip()[:60]!r}")
    elif len(lines) > 1 and _parses_as_code(prose):
        reasons.append("text that parses as a Python program")
    return reasons


def _parses_as_code(text: str) -> bool:
    """True when `text` (dedented) parses as Python with at least one statement that is code."""
    candidate = text.strip()
    if not candidate:
        return False
    attempts = [candidate]
    if candidate.endswith(":"):
        attempts.append(candidate + "\n    pass")  # a block header alone: give it a body
    for source in attempts:
        try:
            module = parse_module(source)
        except (SyntaxError, ValueError):
            continue
        return any(_is_code(node) for node in module.body)
    return False


def _is_code(statement: ast.stmt) -> bool:
    """A bare name, constant, attribute, comparison or `a and b` is prose; anything else is code."""
    if isinstance(statement, ast.AnnAssign) and statement.value is None:
        # `Result: faster` parses as an annotation; without a value it is prose.
        return not isinstance(statement.annotation, ast.Name | ast.Attribute | ast.Constant)
    if not isinstance(statement, ast.Expr):
        return True  # assignment, return, import, def, for, ...
    return any(isinstance(node, _CODE_EXPR) for node in ast.walk(statement.value))
