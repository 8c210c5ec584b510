#!/usr/bin/perl -w
# Configures network namespaces from the inside, one process for a whole batch (see network.ts,
# which runs it as root). It joins each namespace in turn and talks netlink to the kernel there
# itself: no `ip` process per namespace (processes are what a pod's start costs on a small machine).
#
# A new namespace gets its loopback and eth0 up, the pod's address and the default route, and its
# low ports opened to every user there (containers' root is root of their own user namespace only,
# which does not own the pod's network namespace: as Docker and containerd do).
#
# A reused one (an ended pod's, for the next pod) is configured only if nothing of the previous pod
# is left in it: no process (as `ip netns pids` finds them), no socket of any kind, bound or not
# (one passed to a process elsewhere would still be reachable; TCP's TIME_WAIT entries are not
# sockets), no conntrack entry. Otherwise its name
# is printed on stdout and it is left alone (network.ts deletes it instead). What the previous pod
# left that a container cannot change itself (it never holds CAP_NET_ADMIN there) goes, as
# `ip addr flush dev eth0 scope global`, `ip neigh flush dev eth0`, `ip route flush cache` and
# `ip tcp_metrics flush all` would: eth0's global addresses (with the last IPv4 one the kernel
# drops the routes through eth0, the ARP cache and cached route exceptions), its neighbours, the
# IPv4 route cache, TCP metrics. Then the new address and route are set as in a new namespace.
#
# Arguments: setns's system call number, the gateway's address, then per namespace its name
# (under /run/netns), `new` or `reused`, and the pod's address with the prefix length (10.0.0.2/16).
use strict;

# setns's nstype for a network namespace (CLONE_NEWNET in <sched.h>, the same on every architecture).
my $CLONE_NEWNET = 0x40000000;
# <linux/socket.h>, <linux/netlink.h>, <linux/sockios.h>: address families, socket type, protocols,
# SIOCGIFINDEX.
my ($AF_UNSPEC, $AF_INET, $AF_NETLINK, $SOCK_DGRAM, $SOCK_RAW) = (0, 2, 16, 2, 3);
my ($NETLINK_ROUTE, $NETLINK_GENERIC, $SIOCGIFINDEX) = (0, 16, 0x8933);
# Netlink message types and flags (<linux/netlink.h>, <linux/rtnetlink.h>, <linux/genetlink.h>).
my ($NLMSG_ERROR, $NLMSG_DONE) = (2, 3);
my ($RTM_NEWLINK, $RTM_NEWADDR, $RTM_DELADDR, $RTM_GETADDR) = (16, 20, 21, 22);
my ($RTM_NEWROUTE, $RTM_DELNEIGH, $RTM_GETNEIGH) = (24, 29, 30);
my ($F_REQUEST, $F_ACK, $F_DUMP, $F_EXCL, $F_CREATE) = (1, 4, 0x300, 0x200, 0x400);
my ($IFF_UP, $IFA_ADDRESS, $IFA_LOCAL, $RTA_GATEWAY) = (1, 1, 2, 5);
# A default route as `ip route add default via` makes it: table main, protocol boot, unicast.
my ($RT_TABLE_MAIN, $RTPROT_BOOT, $RTN_UNICAST) = (254, 3, 1);
# Neighbours `ip neigh flush` keeps: permanent and no-ARP ones (<linux/neighbour.h>).
my $NUD_KEPT = 0x80 | 0x40;
# The generic netlink controller, and tcp_metrics' delete (<linux/genetlink.h>, <linux/tcp_metrics.h>).
my ($GENL_ID_CTRL, $CTRL_CMD_GETFAMILY, $CTRL_ATTR_FAMILY_ID, $CTRL_ATTR_FAMILY_NAME) = (0x10, 3, 1, 2);
my $TCP_METRICS_CMD_DEL = 2;

my ($setns, $gateway) = splice(@ARGV, 0, 2);
my $seq = 0;

sub ipv4 { pack('C4', split(/\./, $_[0])) }

# A netlink attribute: length, type, data, padded to 4 bytes.
sub attr {
  my ($type, $data) = @_;
  my $attr = pack('S S', 4 + length($data), $type) . $data;
  return $attr . "\0" x ((4 - length($attr) % 4) % 4);
}

# The messages of a received buffer, as [type, payload].
sub messages {
  my $buf = shift;
  my @messages;
  while (length($buf) >= 16) {
    my ($len, $type) = unpack('L S', $buf);
    last if $len < 16 || $len > length($buf);
    push @messages, [$type, substr($buf, 16, $len - 16)];
    $buf = substr($buf, ($len + 3) & ~3);
  }
  return @messages;
}

sub netlink {
  my $protocol = shift;
  socket(my $s, $AF_NETLINK, $SOCK_RAW, $protocol) or die "netlink socket: $!\n";
  return $s;
}

# Sends a request and answers the kernel's replies until its acknowledgement or the dump's end;
# dies naming `what` with the kernel's error.
sub request {
  my ($s, $what, $type, $flags, $body) = @_;
  $seq++;
  my $message = pack('L S S L L', 16 + length($body), $type, $F_REQUEST | $flags, $seq, 0) . $body;
  defined(send($s, $message, 0)) or die "$what: $!\n";
  my @replies;
  while (1) {
    defined(recv($s, my $buf, 65536, 0)) or die "$what: $!\n";
    for my $m (messages($buf)) {
      my ($reply, $payload) = @$m;
      return @replies if $reply == $NLMSG_DONE;
      if ($reply == $NLMSG_ERROR) {
        my $error = unpack('i', $payload);
        return @replies if $error == 0;
        $! = -$error;
        die "$what: $!\n";
      }
      push @replies, $m;
    }
  }
}

sub attributes {
  my $data = shift;
  my %attributes;
  while (length($data) >= 4) {
    my ($len, $type) = unpack('S S', $data);
    last if $len < 4;
    $attributes{$type & 0x3fff} = substr($data, 4, $len - 4);
    $data = substr($data, ($len + 3) & ~3);
  }
  return %attributes;
}

# tcp_metrics' generic netlink family (the same in every namespace).
my $tcpMetrics = do {
  my $s = netlink($NETLINK_GENERIC);
  my ($family) = request($s, 'tcp_metrics family', $GENL_ID_CTRL, $F_ACK,
    pack('C C x2', $CTRL_CMD_GETFAMILY, 1) . attr($CTRL_ATTR_FAMILY_NAME, "tcp_metrics\0"));
  my %attributes = attributes(substr($family->[1], 4));
  unpack('S', $attributes{$CTRL_ATTR_FAMILY_ID});
};

# The index of a link in the namespace this process is in.
sub link_index {
  my $name = shift;
  socket(my $s, $AF_INET, $SOCK_DGRAM, 0) or die "socket: $!\n";
  my $ifr = pack('a16 x24', $name);
  ioctl($s, $SIOCGIFINDEX, $ifr) or die "$name: $!\n";
  return unpack('x16 i', $ifr);
}

sub link_up {
  my ($s, $index) = @_;
  request($s, "link $index up", $RTM_NEWLINK, $F_ACK, pack('C x S i L L', $AF_UNSPEC, 0, $index, $IFF_UP, $IFF_UP));
}

# Deletes what a dump found that `keep` does not keep, sending each back as `ip ... flush` does.
sub flush {
  my ($s, $what, $dump, $delete, $header, $keep) = @_;
  for my $m (request($s, "$what dump", $dump, $F_DUMP, $header)) {
    next if $keep->($m->[1]);
    # Already gone (with an address deleted before it) is what was wanted.
    eval { request($s, $what, $delete, $F_ACK, $m->[1]); 1 } or $@ =~ /No such|Cannot assign/ or die $@;
  }
}

# What is left in the namespace this process is in: a description, or undef. The kernel counts
# per namespace every socket a process made there, bound or not, of every family (TCP's TIME_WAIT
# entries are not sockets and are not counted), and its conntrack entries: reading the two counters
# costs microseconds, where listing /proc/net/tcp walks the machine's whole TCP hash table
# (~10 ms for each of tcp and tcp6 here, and more under load).
# A closed netlink socket (`ip`'s, this program's own on an earlier pod) stays counted until the
# kernel frees it after an RCU grace period: milliseconds, longer under load. So a count above 0
# is read again, 5 ms apart, for up to 100 ms before what it counts is taken as left.
sub leftover {
  my $sockets;
  for my $attempt (0 .. 20) {
    select(undef, undef, undef, 0.005) if $attempt > 0;
    open(my $f, '<', '/proc/self/net/sockstat') or return 'no socket count';
    ($sockets) = <$f> =~ /^sockets: used (\d+)/ or return 'no socket count';
    last if $sockets == 0;
  }
  return "$sockets sockets" if $sockets > 0;
  # Without conntrack in this kernel there is nothing to count.
  open(my $ct, '<', '/proc/sys/net/netfilter/nf_conntrack_count') or return undef;
  my $entries = <$ct>;
  return $entries > 0 ? "$entries conntrack entries" : undef;
}

sub put {
  my ($file, $text) = @_;
  my $f;
  open($f, '>', $file) and print($f $text) and close($f) or die "$file: $!\n";
}

# The reset of a reused namespace (see the top).
sub reset_namespace {
  my ($s, $eth0) = @_;
  flush($s, 'address', $RTM_GETADDR, $RTM_DELADDR, pack('C x3 L', $AF_UNSPEC, 0), sub {
    my ($family, $prefix, $flags, $scope, $index) = unpack('C C C C L', $_[0]);
    return $index != $eth0 || $scope != 0;
  });
  flush($s, 'neighbour', $RTM_GETNEIGH, $RTM_DELNEIGH, pack('C x3 i S C C', $AF_UNSPEC, 0, 0, 0, 0), sub {
    my ($family, $index, $state) = unpack('C x3 i S', $_[0]);
    return $index != $eth0 || ($state & $NUD_KEPT);
  });
  put('/proc/sys/net/ipv4/route/flush', "1\n");
  my $genl = netlink($NETLINK_GENERIC);
  request($genl, 'tcp_metrics flush', $tcpMetrics, $F_ACK, pack('C C x2', $TCP_METRICS_CMD_DEL, 1));
}

# The pod's address on eth0 and the default route through the gateway.
sub address_and_route {
  my ($s, $eth0, $address, $up) = @_;
  my ($ip, $bits) = split m{/}, $address;
  request($s, "address $address", $RTM_NEWADDR, $F_ACK | $F_CREATE | $F_EXCL,
    pack('C C C C L', $AF_INET, $bits, 0, 0, $eth0) . attr($IFA_LOCAL, ipv4($ip)) . attr($IFA_ADDRESS, ipv4($ip)));
  $up->() if $up;
  request($s, "default route via $gateway", $RTM_NEWROUTE, $F_ACK | $F_CREATE | $F_EXCL,
    pack('C8 L', $AF_INET, 0, 0, 0, $RT_TABLE_MAIN, $RTPROT_BOOT, 0, $RTN_UNICAST, 0) .
    attr($RTA_GATEWAY, ipv4($gateway)));
}

# The network namespaces some process is in ("net:[inode]"), this one's excepted: read before this
# process joins any, once for the whole batch (readlink: a stat of each costs several times more),
# and only for a batch with a reused namespace: a new one holds no process but this one. The read
# costs ~25 us a process, ~25 ms with 200 pods running (4 processes each).
my %occupied;
my $reused = grep { $ARGV[3 * $_ + 1] eq 'reused' } 0 .. int(@ARGV / 3) - 1;
for my $proc ($reused ? glob('/proc/[0-9]*') : ()) {
  next if $proc eq "/proc/$$";
  my $ns = readlink("$proc/ns/net") or next;    # ended meanwhile
  $occupied{$ns} = 1;
}

$| = 1;
while (my ($name, $kind, $address) = splice(@ARGV, 0, 3)) {
  open(my $ns, '<', "/run/netns/$name") or die "netns $name: $!\n";
  if ($kind eq 'reused' && $occupied{'net:[' . (stat($ns))[1] . ']'}) {
    print "$name\n";
    next;
  }
  syscall($setns, fileno($ns), $CLONE_NEWNET) == 0 or die "setns $name: $!\n";
  if ($kind eq 'reused' && defined leftover()) {
    print "$name\n";
    next;
  }
  # Sockets belong to the namespace they were made in: this one's, made after joining it.
  eval {
    my $s = netlink($NETLINK_ROUTE);
    my $eth0 = link_index('eth0');
    if ($kind eq 'reused') {
      reset_namespace($s, $eth0);
      address_and_route($s, $eth0, $address);
    } else {
      put('/proc/sys/net/ipv4/ip_unprivileged_port_start', "0\n");
      link_up($s, link_index('lo'));
      address_and_route($s, $eth0, $address, sub { link_up($s, $eth0) });
    }
    1;
  } or die "netns $name: $@";
}
