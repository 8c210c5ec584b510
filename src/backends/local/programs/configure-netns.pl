#!/usr/bin/perl -w
# Configures new network namespaces from the inside, one process for a whole batch rather than an
# `ip -n` and an `ip netns exec sysctl` per namespace (processes are what a pod's start costs on a
# small machine; see network.ts, which runs it as root). It joins each namespace in turn, opens its
# low ports to every user there (containers' root is root of their own user namespace only, which
# does not own the pod's network namespace: as Docker and containerd do), and runs `ip -batch`
# inside it with that namespace's lines. Those `ip` processes run side by side (a few at a time):
# each keeps the namespace it was started in, whichever this process joins next.
#
# Arguments: setns's system call number, then a name (under /run/netns) and its lines per namespace.
use strict;

# setns's nstype for a network namespace (CLONE_NEWNET in <sched.h>, the same on every architecture).
my $CLONE_NEWNET = 0x40000000;

# At most this many `ip` processes at once (a batch may configure a hundred namespaces).
my $AT_ONCE = 8;

my $setns = shift @ARGV;
my @running;

sub finish {
  my ($name, $ip) = @{ shift @running };
  close($ip) or die "ip -batch in netns $name failed\n";
}

while (my ($name, $lines) = splice(@ARGV, 0, 2)) {
  open(my $ns, '<', "/run/netns/$name") or die "netns $name: $!\n";
  syscall($setns, fileno($ns), $CLONE_NEWNET) == 0 or die "setns $name: $!\n";
  my $ports;
  open($ports, '>', '/proc/sys/net/ipv4/ip_unprivileged_port_start')
    and print($ports "0\n")
    and close($ports)
    or die "netns $name: ip_unprivileged_port_start: $!\n";
  open(my $ip, '|-', 'ip', '-batch', '-') or die "ip: $!\n";
  # Written through at once: `ip` does its work now and then only waits for the end of its input.
  select((select($ip), $| = 1)[0]);
  print $ip $lines;
  push @running, [$name, $ip];
  finish() if @running >= $AT_ONCE;
}
finish() while @running;
