"""The system call battery that `reach.py` runs inside the child (the seccomp allowlist, issue
"Hidden means hidden" item 5): source of functions defined in the child's namespace.

- `legit()`: what CPython, NumPy, PyTorch and matplotlib do on paths the reference notebooks do
  not take (threads, fork, multiprocessing, subprocess and shells, files, polling, asyncio,
  signals, timers, limits); each entry "ok" or the error it raised;
- `unlisted()`: calls outside the allowlist, old and new (open_tree_attr, 467, is Linux 6.15's;
  1000 is none yet), each with arguments a kernel that ran it would refuse otherwise (a bad
  fd, a NULL pointer): each entry the errno name, "open" when the call succeeded;
- `addresses(dgram_path, abstract, stream_path)`: every way a socket the child can make
  (socketpair) could name a host socket; each entry the errno name, "sent" when it went out.
"""

CALL_PROBES = r"""
import ctypes, errno, os, socket

def _libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc

def _raw(nr, *args):
    libc = _libc()
    result = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    return "open" if result >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")

# name -> (x86_64 number, aarch64 number, arguments)
UNLISTED = {
    "open_tree_attr": (467, 467, (-1, 0, 0, 0, 0)),
    "listmount": (458, 458, (0, 0, 0, 0)),
    "made_up_1000": (1000, 1000, ()),
    "io_uring_setup": (425, 425, (1, 0)),
    "memfd_create": (319, 279, (0, 0)),
    "userfaultfd": (323, 282, (0,)),
    "ptrace_attach_parent": (101, 117, (16, os.getppid(), 0, 0)),
    "unshare_nothing": (272, 97, (0,)),
    "setuid_root": (105, 146, (0,)),
    "inotify_init1": (294, 26, (0,)),
    "shmget": (29, 194, (0x61747467, 4096, 0)),
    "mq_open": (240, 180, (0, 0, 0, 0)),
    "seccomp": (317, 277, (99, 0, 0)),
    "landlock_create_ruleset": (444, 444, (0, 0, 1)),
    "splice": (275, 76, (-1, 0, -1, 0, 1, 0)),
    "personality_query": (135, 92, (0xFFFFFFFF,)),
}

def unlisted():
    column = 0 if os.uname().machine == "x86_64" else 1
    return {name: _raw(entry[column], *entry[2]) for name, entry in UNLISTED.items()}

def _attempt(action):
    try:
        action()
        return "sent"
    except OSError as error:
        return errno.errorcode.get(error.errno, str(error.errno))

def addresses(dgram_path, abstract, stream_path):
    dgram = lambda: socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)[0]
    stream = lambda: socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)[0]
    x86 = os.uname().machine == "x86_64"
    found = {
        "dgram_sendto_path": _attempt(lambda: dgram().sendto(b"attn-adv", dgram_path)),
        "dgram_connect_path": _attempt(
            lambda: (lambda s: (s.connect(dgram_path), s.send(b"attn-adv")))(dgram())
        ),
        "dgram_sendmsg_path": _attempt(
            lambda: dgram().sendmsg([b"attn-adv"], [], 0, dgram_path)
        ),
        "dgram_sendto_abstract": _attempt(lambda: dgram().sendto(b"attn-adv", "\0" + abstract)),
        "stream_connect_path": _attempt(lambda: stream().connect(stream_path)),
        "bind_path": _attempt(lambda: dgram().bind("bound.sock")),
        "listen": _attempt(lambda: stream().listen(1)),
        "accept": _attempt(lambda: stream().accept()),
        # TIPC has pairs too (the kernel would load its module for the child)
        "socketpair_tipc": _attempt(lambda: socket.socketpair(30, socket.SOCK_DGRAM)),
    }
    sock = dgram()
    buffer = ctypes.create_string_buffer(b"attn-adv")
    # a destination whose low half is 0: a filter reading only that half would let it by
    found["sendto_high_address"] = _raw(44 if x86 else 206, sock.fileno(),
                                        ctypes.addressof(buffer), 8, 0, 1 << 32, 16)
    found["sendmmsg_nothing"] = _raw(307 if x86 else 269, sock.fileno(), 0, 0, 0)
    return found

def legit():
    import asyncio, concurrent.futures, mmap, multiprocessing, resource, select, shutil
    import signal, subprocess, sys, tempfile, threading, time
    import numpy as np

    def threads():
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            assert list(pool.map(abs, range(-4, 0))) == [4, 3, 2, 1]
        event = threading.Event()
        threading.Timer(0.01, event.set).start()
        assert event.wait(5)

    def torch_threads():
        import torch
        torch.set_num_threads(2)
        a = torch.randn(256, 256)
        assert torch.allclose(a @ torch.eye(256), a)
        torch.save({"a": a}, "t.pt")
        assert torch.equal(torch.load("t.pt")["a"], a)

    def fork():
        pid = os.fork()
        if pid == 0:
            os._exit(7)
        assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 7

    def multiprocessing_fork():  # (not its locks: they need /dev/shm, which no level opens)
        context = multiprocessing.get_context("fork")
        left, right = context.Pipe()
        process = context.Process(target=left.send, args=({"x": 1},))
        process.start()
        assert right.recv() == {"x": 1}
        process.join()
        assert process.exitcode == 0

    def processes():
        shell = subprocess.run("echo a | tr a b", shell=True, capture_output=True, text=True)
        assert shell.stdout == "b\n", shell
        pid = os.posix_spawn("/bin/true", ["true"], os.environ)
        assert os.waitpid(pid, 0)[1] == 0
        child = subprocess.Popen([sys.executable, "-S", "-c", "pass"], close_fds=True)
        assert child.wait() == 0
        os.close(os.pidfd_open(os.getpid()))

    def files():
        top = tempfile.mkdtemp(dir=".")
        source = os.path.join(top, "a.npy")
        np.save(source, np.arange(5))
        shutil.copy2(source, os.path.join(top, "b.npy"))
        shutil.copytree(top, top + "-copy")
        shutil.move(top + "-copy", top + "-moved")
        os.link(source, os.path.join(top, "hard"))
        os.symlink(source, os.path.join(top, "soft"))
        assert os.readlink(os.path.join(top, "soft")) == source
        os.utime(source, (1, 1))
        os.chmod(source, 0o600)
        os.mkfifo(os.path.join(top, "fifo"))
        with open(source, "r+b") as handle, mmap.mmap(handle.fileno(), 0) as mapped:
            assert len(mapped) > 0
            os.truncate(os.path.join(top, "b.npy"), 10)
        memory = np.memmap(os.path.join(top, "m.dat"), dtype="float32", mode="w+", shape=(8,))
        memory[:] = 1
        memory.flush()
        os.statvfs(".")
        assert sorted(entry.name for entry in os.scandir(top))[0] == "a.npy"
        with open(source, "rb") as fsrc, open(os.path.join(top, "c"), "wb") as fdst:
            os.copy_file_range(fsrc.fileno(), fdst.fileno(), 10)
        shutil.rmtree(top)
        shutil.rmtree(top + "-moved")

    def polling():
        read, write = os.pipe2(os.O_CLOEXEC)
        os.write(write, b"x")
        assert select.select([read], [], [], 1)[0] == [read]
        poll = select.poll()
        poll.register(read)
        assert poll.poll(1000)
        epoll = select.epoll()
        epoll.register(read)
        assert epoll.poll(1)
        epoll.close()
        counter = os.eventfd(0)
        os.eventfd_write(counter, 3)
        assert os.eventfd_read(counter) == 3

    def event_loop():
        async def main():
            loop = asyncio.get_running_loop()
            future = loop.create_future()
            threading.Thread(target=loop.call_soon_threadsafe, args=(future.set_result, 5)).start()
            process = await asyncio.create_subprocess_exec("echo", "hi", stdout=-1)
            out, _ = await process.communicate()
            return await future, out
        assert asyncio.run(main()) == (5, b"hi\n")

    def socketpairs():
        for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
            a, b = socket.socketpair(socket.AF_UNIX, kind)
            a.sendall(b"x")
            assert b.recv(1) == b"x"
            a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
            assert a.getsockopt(socket.SOL_SOCKET, socket.SO_TYPE) == kind
            a.getsockname(), a.getpeername()
            b.send(b"y")
            assert a.recvfrom(1)[0] == b"y"
            a.shutdown(socket.SHUT_RDWR)

    def signals_and_time():
        fired = []
        signal.signal(signal.SIGALRM, lambda *_: fired.append(1))
        signal.setitimer(signal.ITIMER_REAL, 0.01)
        time.sleep(0.2)
        signal.alarm(0)
        signal.pthread_sigmask(signal.SIG_BLOCK, [])
        os.kill(os.getpid(), 0)
        assert fired
        time.monotonic(), time.process_time(), time.thread_time(), os.times()
        resource.getrusage(resource.RUSAGE_SELF)

    def limits_and_identity():
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, 512), hard))
        assert os.sched_getaffinity(0)
        os.sched_setaffinity(0, os.sched_getaffinity(0))
        os.getpriority(os.PRIO_PROCESS, 0), os.cpu_count(), os.getloadavg()
        os.getresuid(), os.getgroups(), os.getpgid(0), os.getsid(0), os.uname()
        assert len(os.urandom(16)) == 16 and len(os.getrandom(8)) == 8

    def figures():
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        figure = plt.figure()
        plt.imshow(np.eye(4))
        for ending in ("png", "svg", "pdf"):
            figure.savefig("figure." + ending)
        plt.close(figure)

    checks = [threads, torch_threads, fork, multiprocessing_fork, processes, files, polling,
              event_loop, socketpairs, signals_and_time, limits_and_identity, figures]
    found = {}
    for check in checks:
        try:
            check()
            found[check.__name__] = "ok"
        except BaseException as error:
            found[check.__name__] = f"{type(error).__name__}: {error}"[:300]
    return found
"""
