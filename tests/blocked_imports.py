"""Run ``python -m pipeline ...`` in a subprocess with some top-level modules made unimportable.

That is how a core install (or one without an extra) looks to the command. Used as
``[sys.executable, "-c", script(), "torch,timm", "demo", ...]``: the first argument names the
blocked modules, the rest are the command's. ``report_loaded`` also prints which blocked modules
ended up in ``sys.modules`` (``loaded: []`` when none did).
"""

PROLOGUE = """
import importlib.util, runpy, sys
BLOCKED = tuple(sys.argv[1].split(","))
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r} (blocked by the test)")
sys.meta_path.insert(0, Block())
find_spec = importlib.util.find_spec
importlib.util.find_spec = lambda name, *a, **k: None if name.split(".")[0] in BLOCKED else find_spec(name, *a, **k)
sys.argv = ["pipeline", *sys.argv[2:]]
"""

RUN = """
runpy.run_module("pipeline", run_name="__main__", alter_sys=True)
"""

RUN_REPORTING_LOADED = """
try:
    runpy.run_module("pipeline", run_name="__main__", alter_sys=True)
except SystemExit as e:
    print("loaded:", sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED))
    raise
"""


def script(report_loaded: bool = False) -> str:
    """The ``-c`` program: block the modules named in argv[1], then run ``pipeline`` with the rest."""
    return PROLOGUE + (RUN_REPORTING_LOADED if report_loaded else RUN)
