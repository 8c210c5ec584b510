#!/usr/bin/perl -w
# Configures network namespaces from the inside, one process for a whole batch rather than an
# `ip -n` and an `ip netns exec sysctl` per namespace (processes are what a pod's start costs on a
# small machine; see network.ts, which runs it as root). It joins each namespace in turn and runs
# `ip -batch` inside it with that namespace's lines. Those `ip` processes run side by side (a few
# at a time): each keeps the namespace it was started in, whichever this process joins next.
#
# A new namespace first gets its low ports opened to every user there (containers' root is root of
# their own user namespace only, which does not own the pod's network namespace: as Docker and
# containerd do). A reused one (an ended pod's, for the next pod) is configured only if nothing of
# the previous pod is left in it: no process (as `ip netns pids` finds them), no socket but TCP's
# TIME_WAIT (one passed to a process elsewhere would still be reachable), no conntrack entry.
# Otherwise its name is printed on stdout and it is left alone (network.ts deletes it instead).
#
# Arguments: setns's system call number, then per namespace its name (under /run/netns), `new` or
# `reused`, and its `ip` lines.
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

# The network namespaces some process is in ("net:[inode]"), this one's excepted: read before this
# process joins any, once for the whole batch (readlink: a stat of each costs several times more).
my %occupied;
for my $proc (glob '/proc/[0-9]*') {
  next if $proc eq "/proc/$$";
  my $ns = readlink("$proc/ns/net") or next;    # ended meanwhile
  $occupied{$ns} = 1;
}

# What is left in the namespace this process is in: the first table that holds something, or undef.
sub leftover {
  for my $table (qw(tcp tcp6 udp udp6 udplite udplite6 raw raw6 icmp icmp6 unix packet nf_conntrack)) {
    open(my $f, '<', "/proc/self/net/$table") or next;    # not in this kernel
    <$f> unless $table eq 'nf_conntrack';                   # the others start with a header
    while (my $line = <$f>) {
      # A TCP connection's TIME_WAIT (state 06) belongs to no socket anyone holds.
      next if $table =~ /^tcp/ && (split ' ', $line)[3] eq '06';
      return $table;
    }
  }
  return undef;
}

$| = 1;
while (my ($name, $kind, $lines) = splice(@ARGV, 0, 3)) {
  open(my $ns, '<', "/run/netns/$name") or die "netns $name: $!\n";
  if ($kind eq 'reused') {
    if ($occupied{'net:[' . (stat($ns))[1] . ']'}) {
      print "$name\n";
      next;
    }
  }
  syscall($setns, fileno($ns), $CLONE_NEWNET) == 0 or die "setns $name: $!\n";
  if ($kind eq 'reused') {
    if (defined leftover()) {
      print "$name\n";
      next;
    }
  } else {
    my $ports;
    open($ports, '>', '/proc/sys/net/ipv4/ip_unprivileged_port_start')
      and print($ports "0\n")
      and close($ports)
      or die "netns $name: ip_unprivileged_port_start: $!\n";
  }
  open(my $ip, '|-', 'ip', '-batch', '-') or die "ip: $!\n";
  # Written through at once: `ip` does its work now and then only waits for the end of its input.
  select((select($ip), $| = 1)[0]);
  print $ip $lines;
  push @running, [$name, $ip];
  finish() if @running >= $AT_ONCE;
}
finish() while @running;
