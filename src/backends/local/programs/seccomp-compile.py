"""Compiles ucompute's seccomp profile to the BPF program bubblewrap loads (see seccomp.ts).

Reads the profile as JSON on stdin ({"allowed": [names], "arguments": [rules], "errno": [rules],
"resolve": [names]}), writes the program for this machine's architecture (and, on x86-64, its
32-bit ones) to the file named by its one argument, and prints the native numbers of the system
calls named in "resolve" as JSON: libseccomp knows them by name. System calls libseccomp does not
know on this machine are left out, as Docker does.
"""

import json
import sys

import seccomp


def main() -> None:
    profile = json.load(sys.stdin)
    output = sys.argv[1]
    rules = seccomp.SyscallFilter(defaction=seccomp.ERRNO(1))
    for arch in (seccomp.Arch.X86, seccomp.Arch.X32):
        try:
            rules.add_arch(arch)
        except Exception:
            pass  # Not a sub-architecture of this machine's.
    # A binary tree of system call numbers (libseccomp >= 2.5), not a list compared one by one:
    # the kernel emulates the program for every system call number as it loads it (its cache of
    # always-allowed calls), with interrupts off, in each container's start. Same verdicts.
    try:
        rules.set_attr(seccomp.Attr.CTL_OPTIMIZE, 2)
    except Exception:
        pass  # An older libseccomp: the list, as before.

    def add(action, name, *args):
        try:
            rules.add_rule(action, name, *args)
        except Exception:
            pass  # Unknown to libseccomp here.

    operators = {"EQ": seccomp.EQ, "NE": seccomp.NE, "MASKED_EQ": seccomp.MASKED_EQ}
    for name in profile["allowed"]:
        add(seccomp.ALLOW, name)
    for rule in profile["arguments"]:
        op = operators[rule["op"]]
        if rule["op"] == "MASKED_EQ":
            arg = seccomp.Arg(rule["index"], op, rule["value"], rule["masked"])
        else:
            arg = seccomp.Arg(rule["index"], op, rule["value"])
        add(seccomp.ALLOW, rule["syscall"], arg)
    for rule in profile["errno"]:
        add(seccomp.ERRNO(rule["errno"]), rule["syscall"])
    with open(output, "wb") as out:
        rules.export_bpf(out)
    native = seccomp.Arch.NATIVE
    numbers = {name: seccomp.resolve_syscall(native, name) for name in profile["resolve"]}
    json.dump(numbers, sys.stdout)


main()
