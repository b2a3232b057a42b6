#!/usr/bin/env python3
"""Runs a command and records the CPU time it and its children used.

    run_timed.py OUT_FILE CMD [ARGS...]

Writes "<cpu seconds> <wall seconds>" to OUT_FILE (user + system time of
every descendant it waited for, so `timeout taskset redis-benchmark` counts
the client) and exits with the command's status. The suite uses it to tell
a client-bound row (client near 100% of a core) from a server-bound one.
"""
import resource
import subprocess
import sys
import time


def main():
    out, cmd = sys.argv[1], sys.argv[2:]
    start = time.monotonic()
    rc = subprocess.call(cmd)
    wall = time.monotonic() - start
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(out, "w", encoding="utf-8") as fh:
        fh.write(f"{used.ru_utime + used.ru_stime:.4f} {wall:.4f}\n")
    sys.exit(rc)


if __name__ == "__main__":
    main()
