"""How a shell enters a running sandboxed container, as `runc exec` does (see shell-entry.ts).

It joins the container's namespaces (user, mount, pid, network, uts, ipc), root and working
directory, becomes its user, and takes the same limits as the container's command before running
anything of the container: the capabilities the container has, no_new_privs and the same seccomp
program. Run by the host's Python with -I -S, so that no variable or file of the job changes what
it runs. Arguments: target pid, uid, gid, compiled seccomp program, capabilities kept
(comma-separated), then the command. The shell's process is a child (a pid namespace applies to
children).
"""

import ctypes, fcntl, os, signal, sys
target, uid, gid, seccomp_file, caps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
command = sys.argv[6:]
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
libcap = ctypes.CDLL("libcap.so.2", use_errno=True)
def check(result, what):
    if result != 0:
        sys.exit("ucompute shell: " + what + ": " + os.strerror(ctypes.get_errno()))
with open(seccomp_file, "rb") as f:
    program = f.read()
with open("/proc/sys/kernel/cap_last_cap") as f:
    last_cap = int(f.read())
keep = set()
for name in filter(None, caps.split(",")):
    value = ctypes.c_int()
    check(libcap.cap_from_name(name.encode(), ctypes.byref(value)), "capability " + name)
    keep.add(value.value)
# The container's user namespace is entered last: root may enter the others from outside. Without
# root, first the user namespace that owns them, for the rights it gives there (bubblewrap makes
# the container's own inside that one). Those the container shares with ucompute (the host
# network, without root) are not entered again.
own = lambda pid, ns: os.readlink("/proc/" + pid + "/ns/" + ns)
spaces = [ns for ns in ["ipc", "uts", "net", "pid", "mnt", "user"] if own(target, ns) != own("self", ns)]
fds = [(ns, os.open("/proc/" + target + "/ns/" + ns, os.O_RDONLY)) for ns in spaces]
if os.geteuid() != 0:
    NS_GET_USERNS = 0xB701
    fds.insert(0, ("user", fcntl.ioctl(dict(fds)["mnt"], NS_GET_USERNS)))
root = os.open("/proc/" + target + "/root", os.O_RDONLY | os.O_DIRECTORY)
cwd = os.open("/proc/" + target + "/cwd", os.O_RDONLY | os.O_DIRECTORY)
# Read now: once in the mount namespace, /proc is the container's, where this process has no pid.
entered = {own("self", "user")}
fds = [(ns, fd, os.readlink("/proc/self/fd/" + str(fd))) for ns, fd in fds]
for ns, fd, identity in fds:
    # The owning user namespace may be the container's own: it is entered once.
    if identity not in entered:
        check(libc.setns(fd, 0), "entering the container's " + ns + " namespace")
        entered.add(identity)
    os.close(fd)
os.fchdir(root)
os.chroot(".")
os.fchdir(cwd)
os.close(root)
os.close(cwd)
try:
    os.setgroups([])
except PermissionError:
    pass  # The namespace refuses setgroups (bubblewrap's own): there are none to drop.
os.setresgid(gid, gid, gid)
os.setresuid(uid, uid, uid)
PR_CAPBSET_DROP, PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, PR_CAP_AMBIENT_CLEAR_ALL = 24, 47, 2, 4
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
CAP_INHERITABLE, CAP_SET, CAP_CLEAR = 2, 1, 0
for cap in range(last_cap + 1):
    if cap not in keep:
        check(libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), "dropping capability " + str(cap))
# As bubblewrap leaves them: the kept ones inheritable and ambient, so that they survive exec.
libcap.cap_get_proc.restype = ctypes.c_void_p
state = ctypes.c_void_p(libcap.cap_get_proc())
every = (ctypes.c_int * (last_cap + 1))(*range(last_cap + 1))
check(libcap.cap_set_flag(state, CAP_INHERITABLE, last_cap + 1, every, CAP_CLEAR), "clearing inheritable capabilities")
if keep:
    kept = (ctypes.c_int * len(keep))(*sorted(keep))
    check(libcap.cap_set_flag(state, CAP_INHERITABLE, len(keep), kept, CAP_SET), "setting inheritable capabilities")
check(libcap.cap_set_proc(state), "setting capabilities")
check(libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clearing ambient capabilities")
for cap in sorted(keep):
    check(libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap, 0, 0), "raising ambient capability " + str(cap))
check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "setting no_new_privs")
child = os.fork()
if child == 0:
    # Python ignores these itself; an ignored signal would stay ignored in the shell.
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_DFL)
    # Whatever ucompute inherited (the terminal is 0 to 2): not the container's.
    os.closerange(3, 2**31 - 1)
    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
    code = ctypes.create_string_buffer(program, len(program))
    fprog = Program(len(program) // 8, ctypes.addressof(code))
    check(libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0), "loading the seccomp program")
    try:
        os.execvp(command[0], command)
    except OSError as error:
        sys.exit("ucompute shell: " + command[0] + ": " + error.strerror)
# The terminal's signals are the shell's to handle; this process only reports how it ended.
for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGTSTP):
    signal.signal(sig, signal.SIG_IGN)
status = os.waitpid(child, 0)[1]
sys.exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))
