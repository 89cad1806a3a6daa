"""Runs one shell command as the only child of a new PID namespace's init.

Exec'd by the bash tool in a process whose children start a new PID namespace. Its one child is
the namespace's init: that init runs ``bash -c COMMAND`` as its own child (so the command's own
``kill $$`` still works, since an init ignores signals it has no handler for), reaps orphans, and
hands the command's exact wait status back over a pipe. When the init exits the kernel kills
everything left in the namespace; this process then ends as the command did, by the same signal
if it was killed by one.

    python -I -S pid_init.py COMMAND
"""

import os
import signal
import sys


def main() -> None:
    r, w = os.pipe()
    init = os.fork()
    if init == 0:
        try:
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            command = os.fork()
            if command == 0:
                for sig in (signal.SIGPIPE, signal.SIGXFSZ):
                    signal.signal(sig, signal.SIG_DFL)
                os.execvp("bash", ["bash", "-c", sys.argv[1]])
            while True:
                pid, status = os.wait()
                if pid == command:
                    break
            os.write(w, str(status).encode())
        finally:  # neither child may run on into the code below; a failed exec exits 127, as bash does
            os._exit(127)
    os.close(w)
    os.waitpid(init, 0)
    reply = os.read(r, 32)
    status = int(reply) if reply else signal.SIGKILL
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            signal.signal(sig, signal.SIG_DFL)
        except (OSError, ValueError):
            pass
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    os._exit(os.waitstatus_to_exitcode(status))


if __name__ == "__main__":
    main()
