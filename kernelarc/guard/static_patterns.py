"""What the static rules match: qualified names, builtins, attributes, token patterns, paths.

Place in the flow: the tables `static_scan.py` matches against; each entry names a rule id of the
catalogue (`static_rules.py`). Apart from the matcher so that adding a name to a rule is a
one-line change here, with no need to read the AST pass.
"""

import re

# Qualified names (after alias resolution) and the rule they trigger; a prefix matches itself
# and anything below it (`subprocess` matches `subprocess.run`).
QUALNAME_RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("KA-S001", ("sys.modules", "sys.meta_path", "sys.path_hooks", "sys.path_importer_cache",
                 "sys.settrace", "sys.setprofile", "sys.addaudithook", "sys.argv",
                 "sys.orig_argv", "sys.excepthook", "sys.path.insert", "sys.path.append",
                 "sys.path.extend", "sys.path.remove", "sys.setrecursionlimit")),
    ("KA-S002", ("builtins", "importlib", "imp", "pkgutil", "runpy")),
    ("KA-S004", ("cupti", "torch.cuda.Event.elapsed_time")),
    ("KA-S005", ("torch.manual_seed", "torch.seed", "torch.set_rng_state",
                 "torch.random.manual_seed", "torch.random.seed", "torch.random.set_rng_state",
                 "torch.cuda.manual_seed", "torch.cuda.manual_seed_all", "torch.cuda.seed",
                 "torch.cuda.seed_all", "torch.cuda.set_rng_state",
                 "torch.cuda.set_rng_state_all", "random.seed", "random.setstate",
                 "numpy.random.seed", "numpy.random.set_state")),
    ("KA-S006", ("gc.get_objects", "gc.get_referrers", "gc.get_referents", "gc.callbacks")),
    ("KA-S007", ("sys._getframe", "sys._current_frames", "inspect.currentframe",
                 "inspect.stack", "inspect.getouterframes", "inspect.getframeinfo",
                 "inspect.trace", "traceback.extract_stack", "traceback.walk_stack")),
    ("KA-S008", ("threading", "_thread", "multiprocessing", "concurrent", "asyncio",
                 "torch.multiprocessing", "torch.jit.fork", "torch.jit._fork", "os.fork",
                 "os.forkpty", "os.register_at_fork", "sched")),
    ("KA-S009", ("subprocess", "os.system", "os.popen", "os.execl", "os.execle", "os.execlp",
                 "os.execlpe", "os.execv", "os.execve", "os.execvp", "os.execvpe", "os.spawnl",
                 "os.spawnle", "os.spawnlp", "os.spawnlpe", "os.spawnv", "os.spawnve",
                 "os.spawnvp", "os.spawnvpe", "os.posix_spawn", "os.posix_spawnp", "os.kill",
                 "os.killpg", "os.abort", "os._exit", "pty", "signal", "atexit", "sys.exit")),
    ("KA-S010", ("os.open", "os.read", "os.write", "os.dup", "os.dup2", "os.fdopen",
                 "os.pipe", "os.remove", "os.unlink", "os.rename", "os.replace", "os.mkdir",
                 "os.makedirs", "os.listdir", "os.scandir", "os.walk", "os.chdir", "os.symlink",
                 "os.link", "os.truncate", "os.sendfile", "os.mkfifo", "os.rmdir",
                 "os.removedirs", "io.open", "io.FileIO", "pathlib", "shutil", "tempfile",
                 "pickle", "marshal", "shelve", "dill", "cloudpickle", "mmap", "glob",
                 "fileinput", "sys.stdout", "sys.stderr", "sys.stdin", "sys.__stdout__",
                 "sys.__stderr__", "sys.__stdin__", "torch.save", "torch.load",
                 "torch.from_file", "torch.UntypedStorage.from_file", "numpy.load",
                 "numpy.save", "numpy.savez", "numpy.fromfile", "numpy.memmap", "numpy.loadtxt",
                 "numpy.savetxt", "safetensors", "h5py")),
    ("KA-S011", ("socket", "urllib", "urllib3", "requests", "http", "httpx", "aiohttp",
                 "ftplib", "smtplib", "ssl", "websocket", "websockets", "xmlrpc", "grpc",
                 "telnetlib", "paramiko")),
    ("KA-S012", ("ctypes", "_ctypes", "cffi", "cppyy", "zipimport", "torch.ops.load_library",
                 "torch.classes.load_library")),
    ("KA-S013", ("torch.utils.cpp_extension",)),
    ("KA-S016", ("hashlib", "zlib", "xxhash", "mmh3", "binascii.crc32")),
    ("KA-S017", ("_kernelarc_reference", "_reference")),
    ("KA-S018", ("kernelarc", "sol_execbench")),
    ("KA-S019", ("types.CodeType", "types.FunctionType", "code.interact")),
    ("KA-S022", ("os.putenv", "os.unsetenv")),
    ("KA-S033", ("time", "weakref", "os.environ", "os.getenv")),
    ("KA-S034", ("torch.backends", "torch.set_float32_matmul_precision",
                 "torch.set_default_dtype", "torch.set_default_device",
                 "torch.use_deterministic_algorithms", "torch._dynamo.config",
                 "torch._inductor.config", "torch.set_flush_denormal", "torch.set_num_threads")),
)  # fmt: skip

# Assignments under these prefixes are settings (flagged, KA-S034), not monkeypatching.
SETTING_PREFIXES = ("torch.backends", "torch._dynamo.config", "torch._inductor.config")

# Builtins used by bare name (when the name is not imported or assigned in the file).
BUILTIN_RULES = {
    "open": "KA-S010",
    "input": "KA-S010",
    "__import__": "KA-S002",
    "__builtins__": "KA-S002",
    "eval": "KA-S019",
    "exec": "KA-S019",
    "compile": "KA-S019",
    "breakpoint": "KA-S019",
    "exit": "KA-S009",
    "quit": "KA-S009",
}

# Attribute names that matter whatever object they are read from.
ATTRIBUTE_RULES = {
    "elapsed_time": "KA-S004",
    "_getframe": "KA-S007",
    "f_back": "KA-S007",
    "f_globals": "KA-S007",
    "f_locals": "KA-S007",
    "f_builtins": "KA-S007",
    "tb_frame": "KA-S007",
    "gi_frame": "KA-S007",
    "cr_frame": "KA-S007",
    "ag_frame": "KA-S007",
    "__loader__": "KA-S012",
    "load_inline": "KA-S013",
    "__code__": "KA-S020",
    "__globals__": "KA-S020",
    "__closure__": "KA-S020",
    "__subclasses__": "KA-S020",
    "__builtins__": "KA-S002",
    "as_subclass": "KA-S021",
    "_make_subclass": "KA-S021",
    "_make_wrapper_subclass": "KA-S021",
    "__torch_function__": "KA-S021",
    "__torch_dispatch__": "KA-S021",
    "data_ptr": "KA-S031",
}

# Token-level patterns over the source without comments and docstrings (other strings are kept,
# so that getattr(x, "elapsed_time") is caught too).
TOKEN_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("KA-S001", re.compile(r"\bsys\s*\.\s*modules\b")),
    ("KA-S002", re.compile(r"\b__import__\b|\b__builtins__\b")),
    ("KA-S004", re.compile(r"\belapsed_time\b|\bcupti\b", re.IGNORECASE)),
    ("KA-S006", re.compile(r"\bget_objects\b|\bget_referrers\b|\bget_referents\b")),
    ("KA-S007", re.compile(r"\b_getframe\b|\bcurrentframe\b")),
    ("KA-S012", re.compile(r"\b__loader__\b")),
    ("KA-S013", re.compile(r"\bload_inline\b|\bcpp_extension\b")),
    ("KA-S017", re.compile(
        r"\b_kernelarc_reference\b|\b_reference\.py\b|definition\.json|workload\.jsonl"
        r"|\bresult\.json\b|\brequest\.json\b|\bsolution\.json\b")),
)  # fmt: skip

CACHE_DECORATORS = ("functools.cache", "functools.lru_cache", "functools.cached_property")
IDENTITY_CALLS = frozenset({"id", "hash"})
IDENTITY_ATTRS = frozenset({"data_ptr", "untyped_storage", "storage", "_cdata", "_version"})
CONTAINER_CALLS = frozenset(
    {"dict", "list", "set", "OrderedDict", "defaultdict", "deque", "WeakKeyDictionary",
     "WeakValueDictionary", "Counter", "ChainMap"}
)  # fmt: skip
STORE_METHODS = frozenset(
    {"get", "setdefault", "pop", "update", "append", "add", "insert", "__setitem__",
     "__getitem__", "__contains__"}
)  # fmt: skip
ENV_WRITE_METHODS = frozenset({"update", "setdefault", "pop", "popitem", "clear", "__setitem__"})

RESERVED_FILES = frozenset(
    {"definition.json", "workload.jsonl", "solution.json", "config.json", "eval_driver.py",
     "build_ext.py", "_reference.py", "request.json", "result.json", "sitecustomize.py",
     "usercustomize.py"}
)  # fmt: skip
RESERVED_TOP_LEVEL = frozenset(
    {"kernelarc", "sol_execbench", "torch", "triton", "numpy", "safetensors",
     "_kernelarc_reference", "_reference", "cupti"}
)  # fmt: skip
