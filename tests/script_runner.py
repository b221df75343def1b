"""One Python interpreter for the suite's array-API scripts (the ``array_api_python`` fixture of ``conftest.py``).

A script that fits on another array library under scikit-learn's ``array_api_dispatch`` needs ``SCIPY_ARRAY_API=1``
before SciPy is imported, so it cannot run in the test process.  Rather than a fresh interpreter per script (each
importing numpy, SciPy, scikit-learn and relaxep again), a pytest worker starts this module once as a server with
``SCIPY_ARRAY_API=1``; it imports those libraries and then runs each script it is sent in a forked copy of itself:
each script has its own process state (its own namespace, its own monkeypatches, its own failure or crash), as
under ``python -c``, and its exit status, standard output and standard error come back to the test that sent it,
which asserts on them as before.  Without ``os.fork`` (Windows) each script runs in a fresh interpreter instead.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

#: what the server imports once, before any script (each script still imports what it uses)
PRELOAD = (
    "numpy",
    "scipy",
    "scipy.linalg",
    "scipy.optimize",
    "scipy.special",
    "scipy.stats",
    "sklearn",
    "sklearn.gaussian_process",
    "array_api_compat",
    "array_api_strict",
    "relaxep",
)


class ScriptRunner:
    """Runs Python scripts as ``python -c code *args`` with ``SCIPY_ARRAY_API=1``, through one server process."""

    def __init__(self) -> None:
        self.env = dict(os.environ, SCIPY_ARRAY_API="1")
        self._server: subprocess.Popen | None = None
        self._log = None

    def _start(self) -> subprocess.Popen:
        if self._server is None or self._server.poll() is not None:  # not started yet, or died: a fresh one
            self._log = tempfile.TemporaryFile(mode="w+")
            self._server = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._log,
                env=self.env,
                text=True,
            )
        return self._server

    def run(self, code: str, *args: str) -> subprocess.CompletedProcess:
        """The script's result; a non-zero exit status fails the caller with the script's standard error."""
        argv = [sys.executable, "-c", code, *args]
        if not hasattr(os, "fork"):
            done = subprocess.run(argv, env=self.env, capture_output=True, text=True)
        else:
            server = self._start()
            server.stdin.write(json.dumps({"code": code, "args": list(args)}) + "\n")
            server.stdin.flush()
            line = server.stdout.readline()
            if not line:
                self._log.seek(0)
                raise RuntimeError(f"the script server ended:\n{self._log.read()[-3000:]}")
            reply = json.loads(line)
            done = subprocess.CompletedProcess(argv, reply["returncode"], reply["stdout"], reply["stderr"])
        if done.returncode != 0:
            raise AssertionError(f"the script exited with status {done.returncode}:\n{done.stderr[-3000:]}")
        return done

    def close(self) -> None:
        if self._server is not None and self._server.poll() is None:
            self._server.stdin.close()
            self._server.wait(timeout=60)
        if self._log is not None:
            self._log.close()


def _run_in_child(code: str, args: list[str], out_path: str, err_path: str) -> None:
    """In the forked copy: standard output and error to the files, ``sys.argv`` as ``python -c`` sets it, the
    script in a fresh ``__main__`` namespace; exits with its status (1 and the traceback on an exception)."""
    import traceback
    import types

    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)  # the server's requests are not the script's to read
    for fd, path in ((1, out_path), (2, err_path)):
        os.dup2(os.open(path, os.O_WRONLY | os.O_TRUNC), fd)
    sys.stdout = open(1, "w", closefd=False)
    sys.stderr = open(2, "w", closefd=False)
    sys.argv = ["-c", *args]
    main = types.ModuleType("__main__")  # a fresh __main__, as the script's own under ``python -c``
    sys.modules["__main__"] = main
    status = 0
    try:
        exec(compile(code, "<string>", "exec"), main.__dict__)
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, int | None):
            print(exc.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
        status = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(status)


def serve() -> None:
    """Read one request a line from standard input, run it in a fork, answer one line on standard output."""
    import importlib

    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:  # the script that needs it reports it
            pass
    sys.path[0] = ""  # the current directory first, as under ``python -c``
    channel = sys.stdout
    for line in sys.stdin:
        request = json.loads(line)
        out_fd, out_path = tempfile.mkstemp()
        err_fd, err_path = tempfile.mkstemp()
        os.close(out_fd)
        os.close(err_fd)
        try:
            channel.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:  # the script's copy: it never returns to this loop
                try:
                    _run_in_child(request["code"], request["args"], out_path, err_path)
                finally:
                    os._exit(1)
            _, wait_status = os.waitpid(pid, 0)
            with open(out_path) as out, open(err_path) as err:
                reply = {
                    "returncode": os.waitstatus_to_exitcode(wait_status),
                    "stdout": out.read(),
                    "stderr": err.read(),
                }
        finally:
            os.unlink(out_path)
            os.unlink(err_path)
        channel.write(json.dumps(reply) + "\n")
        channel.flush()


if __name__ == "__main__":
    serve()
