"""The driver side: synthetic frames with verl's/ray's file names and line numbers, so Hydra prints the
traceback verl's driver prints (``main_ppo.main`` -> ``run_ppo`` -> ``ray.get`` -> ``as_instanceof_cause``)."""
from __future__ import annotations

import ast
import types
from collections.abc import Callable
from typing import Any

from tests.support.standin.sources import _locate


class _Inert:
    """Stands for any object a replayed source line touches on its non-raising path."""

    def __getattr__(self, name: str) -> _Inert:
        return self

    def __call__(self, *args: Any, **kwargs: Any) -> _Inert:
        return self


def _bind_target(statement: ast.stmt, target: str, nxt: Callable[..., Any]) -> Any:
    """Bind ``target`` so the statement's call through it lands in ``nxt`` with no frame in between."""
    for node in ast.walk(statement):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id == target:
                return nxt
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == target:
                return types.SimpleNamespace(**{func.attr: nxt})
    raise ValueError(f"{target} is not called in {ast.unparse(statement)}")


def _compile_frame(
    path: str, lineno: int, line: str, func: str, target: str, nxt: Callable[..., Any], params: str = "*args, **kwargs"
) -> Callable[..., Any]:
    """A function named ``func`` whose only statement is the real source ``line`` at ``path:lineno``.

    Tracebacks through it show verl's/ray's own file, line, source text and caret columns, because the
    statement keeps its original text and indentation and its line number is moved to the real one.
    """
    tree = ast.parse(f"def {func}({params}):\n{line}\n")
    fdef = tree.body[0]
    assert isinstance(fdef, ast.FunctionDef)
    stmt = fdef.body[0]
    ast.increment_lineno(stmt, lineno - stmt.lineno)
    names = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)} - {"args", "kwargs"}
    scope: dict[str, Any] = {"__name__": "__main__", "__builtins__": __builtins__}
    for name in names:
        scope[name] = _Inert()
    scope[target] = _bind_target(stmt, target, nxt)
    exec(compile(tree, path, "exec"), scope)
    return scope[func]


class DriverChain:
    """``run_ppo`` -> ``ray.get`` -> ... -> ``raise value.as_instanceof_cause()`` as real compiled frames."""

    _FRAMES: list[tuple[str, str, str, str, str]] = [
        ("verl", "trainer/main_ppo.py", "run_ppo", "ray.get(runner.run.remote(config))", "ray"),
        ("ray", "_private/auto_init_hook.py", "auto_init_wrapper", "return fn(*args, **kwargs)", "fn"),
        ("ray", "_private/client_mode_hook.py", "wrapper", "return func(*args, **kwargs)", "func"),
        ("ray", "_private/worker.py", "get", "raise value.as_instanceof_cause()", "value"),
    ]

    def __init__(self) -> None:
        self._error: BaseException | None = None
        head: Callable[..., Any] = self._raise_plain
        last = True
        for package, rel, func, needle, target in reversed(self._FRAMES):
            found = _locate(package, rel, func, needle)
            if found is None:
                continue
            path, lineno, line = found
            if last:
                getter = types.SimpleNamespace(as_instanceof_cause=lambda: self._error)
                head = _compile_frame(path, lineno, line, func, target, getter.as_instanceof_cause)
                last = False
            else:
                head = _compile_frame(path, lineno, line, func, target, head)
        self.head = head

    def _raise_plain(self, *args: Any, **kwargs: Any) -> None:
        assert self._error is not None
        raise self._error

    def arm(self, error: BaseException) -> Callable[..., Any]:
        """Return the ``run_ppo`` replacement that raises ``error`` from ``ray.get``'s frame."""
        self._error = error
        return self.head


def _noop(*args: Any, **kwargs: Any) -> None:
    return None


def build_task_function(body: Callable[[Any], None], state: dict[str, Any]) -> Callable[[Any], None]:
    """The Hydra task function, compiled as verl's ``main_ppo.main`` (file, line numbers and source text).

    ``body(config)`` runs the whole simulation; on failure it stores ``state["run_ppo"]`` so that the
    following replayed line ``run_ppo(config, task_runner_class=TaskRunnerV1)`` raises through
    :class:`DriverChain`, exactly where verl's driver raises. Hydra names the job after this file ("main_ppo").
    """
    v1 = _locate("verl", "trainer/main_ppo.py", "main", "run_ppo(config, task_runner_class=TaskRunnerV1)")
    v0 = _locate("verl", "trainer/main_ppo.py", "main", "run_ppo(config, task_runner_class=TaskRunner)")
    if v1 is not None and v0 is not None:
        path = v1[0]
        src = (
            "def main(config):\n"
            "    _standin_body(config)\n"
            "    if _standin_use_v1(config):\n"
            f"{v1[2]}\n"
            "    else:\n"
            f"{v0[2]}\n"
        )
        try:
            tree = ast.parse(src)
            fdef = tree.body[0]
            assert isinstance(fdef, ast.FunctionDef)
            branch = fdef.body[1]
            assert isinstance(branch, ast.If)
            ast.increment_lineno(branch.body[0], v1[1] - branch.body[0].lineno)
            ast.increment_lineno(branch.orelse[0], v0[1] - branch.orelse[0].lineno)
            scope: dict[str, Any] = {
                "__name__": "__main__",
                "__builtins__": __builtins__,
                "_standin_body": body,
                "_standin_use_v1": lambda cfg: bool(cfg.trainer.use_v1),
                "TaskRunnerV1": _Inert(),
                "TaskRunner": _Inert(),
                "run_ppo": _noop,
            }
            exec(compile(tree, path, "exec"), scope)
            state["scope"] = scope
            return scope["main"]
        except (SyntaxError, AssertionError, IndexError):
            pass

    def main(config: Any) -> None:  # fallback when verl's main_ppo.py moved its lines
        body(config)
        state.get("run_ppo", _noop)(config)

    state["scope"] = None
    return main
