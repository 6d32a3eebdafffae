"""SWE-ReX's bash session, driven for cmdr's session bench (benches/support/session.rs).

Runs in the venv the bench made (`pip install swe-rex`). Starts one `LocalRuntime` bash
session, answers `ready` on stdout, then for each line `N` on stdin runs `echo hi` N times
in that session (each output checked) and answers the elapsed seconds (or `error: …`).
"""

import asyncio
import sys
import time

from swerex.runtime.abstract import BashAction, CreateBashSessionRequest
from swerex.runtime.local import LocalRuntime


async def main() -> None:
    runtime = LocalRuntime()
    await runtime.create_session(CreateBashSessionRequest(session="bench"))
    print("ready", flush=True)
    for line in sys.stdin:
        n = int(line)
        started = time.perf_counter()
        for _ in range(n):
            obs = await runtime.run_in_session(BashAction(command="echo hi", session="bench"))
            if obs.output.strip() != "hi" or obs.exit_code != 0:
                print(f"error: {obs.output!r}, exit {obs.exit_code}", flush=True)
                return
        print(time.perf_counter() - started, flush=True)


asyncio.run(main())
