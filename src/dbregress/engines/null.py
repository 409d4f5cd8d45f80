"""The null engine: no database at all. Its loadgen runs the null driver, whose every
operation does nothing, so a lab of `null@...` builds exercises the scheduler, the
store, the fleet and the reports in seconds. It measures no engine; never compare it."""

from __future__ import annotations

import shutil

from dbregress.engines.base import Engine
from dbregress.shapes.spec import EngineSpec


class NullEngine(Engine):
    embedded = True  # nothing runs but the loadgen, which is what is measured

    def start(self) -> None:
        self.options.workdir.mkdir(parents=True, exist_ok=True)
        self.options.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.options.log_path.write_text("null engine: no server\n")

    def stop(self) -> None:
        shutil.rmtree(self.options.workdir, ignore_errors=True)

    def server_pid(self) -> int:
        raise NotImplementedError("the null engine has no server process")

    def check_alive(self) -> None:
        return None

    def connection(self) -> EngineSpec:
        return {"driver": "null"}

    def data_size_bytes(self) -> int:
        return 0

    def settings_applied(self) -> dict[str, str]:
        return {}
