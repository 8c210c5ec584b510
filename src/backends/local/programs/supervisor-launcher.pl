#!/usr/bin/perl -w
# The supervisors' launcher (see supervisor-launcher.ts, which starts it and talks to it): one
# long-lived Perl that has compiled supervisor.pl once and forks, for each container, a process
# that becomes its supervisor (supervise() of supervisor.pl). A fork of this small process costs a
# fraction of a millisecond; a new Perl for each supervisor cost several, and its start from a
# Node launcher a fork of Node's larger one.
#
# Requests on stdin, one a line, fields separated by single spaces, every string in hex (any bytes
# pass): `ID CWD N ENV×N N READ×N N PATH×N ARGUMENT…` (ENV as `NAME=value`; READ files opened
# read-only and PATH paths opened O_PATH without following a symlink anywhere, passed as the
# supervisor's descriptors 3, 4, … in that order; the supervisor's arguments as supervisor.pl
# takes them). Answers on stdout: `pid ID PID` once the process runs under the supervisor's name,
# `error ID MESSAGE` (hex), and `exited PID` when a supervisor ended (always after its `pid`). It
# ends when stdin closes; the supervisors run on (each in a session of its own).
use strict;
use Fcntl qw(F_DUPFD F_GETFL F_SETFD F_SETFL FD_CLOEXEC O_NONBLOCK O_NOFOLLOW O_RDONLY S_ISLNK);
use POSIX ();

# Linux's O_PATH: a descriptor that names a file without opening its contents.
my $O_PATH = 010000000;
my $SUPERVISOR = ($0 =~ s{[^/]*$}{}r) . 'supervisor.pl';
require $SUPERVISOR;

# Descriptors this process inherited open across exec (without close-on-exec: Perl opens its own
# above 2 with it) would reach every supervisor and container: closed first. Listed, then closed.
sub closeInherited {
  opendir(my $list, '/proc/self/fd') or die "/proc/self/fd: $!";
  my @fds = grep { /^\d+$/ && $_ > 2 } readdir($list);
  closedir($list);
  for my $fd (@fds) {
    open(my $info, '<', "/proc/self/fdinfo/$fd") or next;    # the listing's own, closed since
    my ($flags) = join('', <$info>) =~ /^flags:\s*([0-7]+)$/m;
    close($info);
    POSIX::close($fd) if defined $flags && !(oct($flags) & 02000000);
  }
}

# openat2(2) (numbered alike on every architecture, as every system call from 424 on), its
# RESOLVE_NO_SYMLINKS, O_CLOEXEC (the generic value; Fcntl does not export it) and AT_FDCWD.
my ($SYS_openat2, $RESOLVE_NO_SYMLINKS, $O_CLOEXEC, $AT_FDCWD) = (437, 4, 02000000, -100);

# A descriptor (O_PATH) of the path, opened without following a symlink anywhere: a job can plant
# symlinks in its own folder, and what is bound on its behalf is then refused, not redirected.
# One openat2 call resolves the whole path (the kernel refuses a symlink on the way; a final one it
# opens itself, O_PATH|O_NOFOLLOW). When it fails otherwise than with ENOENT, or opened a symlink,
# or the kernel has no openat2, the path is resolved one component at a time relative to the
# previous folder's descriptor (/proc/self/fd/N/name), which names the symlink: two system calls
# per component, where the one call serves every path that is used.
sub openWithoutSymlinks {
  my $path = shift;
  die "$path is not an absolute path\n" unless $path =~ m{^/};
  my @parts = grep { $_ ne '' && $_ ne '.' } split m{/}, $path;
  die "$path: '..' is not allowed\n" if grep { $_ eq '..' } @parts;
  my ($how, $name) = (pack('QQQ', $O_PATH | O_NOFOLLOW | $O_CLOEXEC, 0, $RESOLVE_NO_SYMLINKS), $path);
  my $fd = syscall($SYS_openat2, $AT_FDCWD, $name, $how, length $how);
  die "$path does not exist\n" if $fd < 0 && $!{ENOENT};
  if ($fd >= 0) {
    open(my $opened, '<&=', $fd) or die "$path: $!\n";
    my @st = stat($opened) or die "$path: $!\n";
    return $opened unless S_ISLNK($st[2]);
  }
  sysopen(my $current, '/', $O_PATH | O_NOFOLLOW) or die "/: $!\n";
  for my $i (0 .. $#parts) {
    my $next;
    unless (sysopen($next, '/proc/self/fd/' . fileno($current) . "/$parts[$i]", $O_PATH | O_NOFOLLOW)) {
      die "$path does not exist\n" if $!{ENOENT};
      die "$path: $!\n";
    }
    $current = $next;
    my @st = stat($current) or die "$path: $!\n";
    die "$path is not used: /" . join('/', @parts[0 .. $i]) . " is a symlink\n" if S_ISLNK($st[2]);
  }
  return $current;
}

# The mount namespace the supervisors' children join before they exec bubblewrap (a descriptor of
# it), and /proc/self/mounts kept open to learn when the host's mounts changed since it was made.
# bubblewrap's first step copies the whole mount table it starts in, under the kernel's one lock
# of mount namespaces: the host's holds a mount per pod's network namespace under /run/netns
# (every pod of the machine). Each child made a namespace of its own and dropped them there (a
# copy of the host's table, a pass over it, an unmount of every pod's mount); now that is done once
# here, and again only when the host's mounts changed (a mount made for a container before its
# request, an image root or a disk mounted since, is then in it). Without one, or when a step
# fails, a child does it itself (supervisor.pl).
my (%bases, $mounts);
my ($CLONE_NEWNS, $MS_REC, $MS_SLAVE, $MNT_DETACH) = (0x00020000, 0x4000, 0x80000, 2);
my ($MS_NOSUID, $MS_REMOUNT, $MS_BIND) = (2, 32, 4096);

# /dev without set-user-id files in the namespace: bubblewrap's --dev binds /dev/null, zero, full,
# random, urandom and tty from it and remounts each bind that lacks nosuid to add it; from a /dev
# that has it (as systemd mounts it) the binds have it already, six mount calls fewer per
# container, the same mounts in the end. Its other options kept; nothing else binds from here
# without adding nosuid itself.
sub devWithoutSetuid {
  my $mount = shift;
  my $flags = (UcomputeSupervisor::mountFlags() // return)->{'/dev'} // return;
  return if $flags & $MS_NOSUID;
  my ($none, $dev) = ('none', '/dev');
  syscall($mount, $none, $dev, 0, $MS_REMOUNT | $MS_BIND | $MS_NOSUID | $flags, 0);
}

# The namespace files (nsfs) the host has mounted besides /run/netns: each owner's user namespace
# (userns.ts), other instances' and tools'. ucompute opens one before a container starts (the
# launcher, in the host's namespace); no container binds one. Each would be copied into every
# container's mount namespace and unmounted from it again, under the kernel's one lock of mount
# namespaces, and read in each of bubblewrap's mountinfo reads: one per owner of the machine.
sub unmountNamespaceFiles {
  my $umount2 = shift;
  open(my $info, '<', '/proc/self/mountinfo') or return;
  my @points;
  while (my $line = <$info>) {
    my ($mount, $source) = split / - /, $line, 2;
    next unless defined $source && $source =~ /^nsfs /;
    my $point = (split / /, $mount)[4];
    $point =~ s/\\([0-7]{3})/chr(oct($1))/ge;
    push @points, $point;
  }
  close($info);
  syscall($umount2, $_, $MNT_DETACH) for @points;
}

# The host's mounts a base holds, as text: its mountinfo without what makeBase drops (/run/netns
# and what is below it, the namespace files). Pods' network namespaces are mounted there and
# unmounted all the time (`ip netns add` and `del`): with a change of those alone the bases stay.
sub hostMountsKept {
  open(my $info, '<', '/proc/self/mountinfo') or return undef;
  my $kept = '';
  while (my $line = <$info>) {
    my ($mount, $source) = split / - /, $line, 2;
    next if defined $source && $source =~ /^nsfs /;
    my $point = (split / /, $mount)[4];
    $kept .= $line unless $point eq '/run/netns' || index($point, '/run/netns/') == 0;
  }
  close($info);
  return $kept;
}

# True when the host's mounts a base holds changed since the last call (or cannot be watched): a
# change marks /proc/self/mounts exceptional in select until it is asked again, and only then is
# the table read (with 200 pods, a base made again cost a copy of ~225 mounts and the detach of
# ~200, under the kernel's one lock of mount namespaces, at ~15 % of the starts).
my $keptMounts;
sub hostMountsChanged {
  unless ($mounts) {
    open($mounts, '<', '/proc/self/mounts') or return 1;
    $keptMounts = hostMountsKept();
    return 1;
  }
  my $changed = '';
  vec($changed, fileno($mounts), 1) = 1;
  return 0 if select(undef, undef, $changed, 0) == 0;
  my $kept = hostMountsKept();
  return 0 if defined $kept && defined $keptMounts && $kept eq $keptMounts;
  $keptMounts = $kept;
  return 1;
}

# A new namespace as each child made its own (a slave of the host's, /run/netns unmounted, the
# prepared mounts made: see UcomputeSupervisor::prepareMounts), made by a child that waits while
# this process opens its /proc/PID/ns/mnt. Undef when a step fails.
sub makeBase {
  my ($unshare, $mount, $umount2, $prepared) = @_;
  pipe(my $madeRead, my $madeWrite) or return undef;
  pipe(my $doneRead, my $doneWrite) or return undef;
  my $pid = fork;
  return undef unless defined $pid;
  if ($pid == 0) {
    close($madeRead);
    close($doneWrite);
    my ($none, $root, $folder) = ('none', '/', '/run/netns');
    my $made = syscall($unshare, $CLONE_NEWNS) == 0 && syscall($mount, $none, $root, 0, $MS_REC | $MS_SLAVE, 0) == 0;
    if ($made) {
      syscall($umount2, $folder, $MNT_DETACH);
      unmountNamespaceFiles($umount2);
      devWithoutSetuid($mount);
      $made = eval { UcomputeSupervisor::prepareMounts($mount, UcomputeSupervisor::preparedPairs($prepared)); 1 };
    }
    syswrite($madeWrite, $made ? 'y' : 'n');
    sysread($doneRead, my $byte, 1);
    POSIX::_exit(0);
  }
  close($madeWrite);
  close($doneRead);
  my $answer = '';
  for (my $tries = 0; $tries < 1000; $tries++) { last if defined sysread($madeRead, $answer, 1) }
  my $namespace;
  undef $namespace unless $answer eq 'y' && open($namespace, '<', "/proc/$pid/ns/mnt");
  close($doneWrite);
  1 while waitpid($pid, 0) < 0 && $!{EINTR};
  return $namespace;
}

# The namespace for a supervisor of these arguments (supervisor.pl's), one for each set of prepared
# mounts asked for (a container with none starts where there are none), all made again when the
# host's mounts changed; undef when it joins no network namespace (its child then stays in the
# host's).
sub baseFor {
  my ($netns, $nsCalls, $prepared) = @{ $_[0] }[7, 9, 12];
  return undef if !defined $prepared || $netns eq '' || $nsCalls eq '';
  my (undef, $unshare, $mount, $umount2) = split /:/, $nsCalls;
  if (hostMountsChanged()) {
    close($_) for grep { defined } values %bases;
    %bases = ();
  }
  $bases{$prepared} //= makeBase($unshare, $mount, $umount2, $prepared);
  return $bases{$prepared};
}

# Ended supervisors are reaped in the main loop; the handler only wakes it (a self-pipe).
pipe(my $wake, my $waker) or die "pipe: $!";
fcntl($waker, F_SETFL, fcntl($waker, F_GETFL, 0) | O_NONBLOCK) or die "fcntl: $!";
$SIG{CHLD} = sub { syswrite($waker, 'x') };

# The whole line, however the write is cut: SIGCHLD is installed without SA_RESTART (Perl's deferred
# signals), so a supervisor that ends while the reader is behind interrupts a write into the full
# pipe, which then returns what it wrote so far, or EINTR for nothing. A line cut there was lost or
# glued to the next answer: a lost `pid` answer left its container's start waiting for ever.
sub answer {
  my $line = "@_\n";
  while (length $line) {
    my $written = syswrite(STDOUT, $line);
    if (defined $written) { substr($line, 0, $written) = '' }
    elsif (!$!{EINTR}) { die "writing an answer: $!\n" }
  }
}
sub unhex { pack('H*', $_[0]) }

# Supervisors forked and not yet under their name, by the descriptor of the pipe each closes once it
# is ([pipe, ID, PID, order of the request]): answered from the main loop (several at once in the
# order of their requests), so that the next requests are forked meanwhile instead of each waiting
# until its child got a core (on a loaded machine, milliseconds apiece).
my (%naming, $requests);

# The `pid` answer of a supervisor that took its name (or ended before it could).
sub named {
  my $fd = shift;
  my ($pipe, $id, $pid) = @{ delete $naming{$fd} };
  close($pipe);
  answer('pid', $id, $pid);
}

# Becomes the supervisor (never returns): named as one before the parent answers, in a session of
# its own, the descriptors at 3, 4, …, the request's folder and environment.
sub becomeSupervisor {
  my ($cwd, $env, $fds, $args, $ready, $named, $namespace) = @_;
  $SIG{CHLD} = 'DEFAULT';
  $0 = "$args->[0] $args->[1]";
  close($_) for $named, $ready, map { $_->[0] } values %naming;
  close($wake);
  close($waker);
  close($mounts) if $mounts;
  # Above the numbers the descriptors below take, close-on-exec: for the child to join, never
  # passed on to bubblewrap or the container (see supervisor.pl).
  if ($namespace) {
    my $high = fcntl($namespace, F_DUPFD, 900) or POSIX::_exit(126);
    open(my $kept, '<&=', $high + 0) or POSIX::_exit(126);
    fcntl($kept, F_SETFD, FD_CLOEXEC) or POSIX::_exit(126);
    UcomputeSupervisor::joinOnStart($kept);
  }
  close($_) for grep { defined } values %bases;
  POSIX::setsid();
  open(STDIN, '<', '/dev/null') and open(STDOUT, '>', '/dev/null') and open(STDERR, '>', '/dev/null')
    or POSIX::_exit(126);
  # First above every number they may take, then in place (dup2's copy is not close-on-exec).
  my @high;
  for my $f (@$fds) { push @high, (fcntl($f, F_DUPFD, 1000) or POSIX::_exit(126)) + 0 }
  close($_) for @$fds;
  for my $i (0 .. $#high) { defined POSIX::dup2($high[$i], 3 + $i) or POSIX::_exit(126); POSIX::close($high[$i]) }
  chdir($cwd) or POSIX::_exit(126);
  %ENV = map { split /=/, $_, 2 } @$env;
  my $ok = eval { UcomputeSupervisor::supervise(@$args); 1 };
  POSIX::_exit($ok ? 0 : 255);
}

# Forks the supervisor of a request; its answer follows once it took its name (see %naming).
sub start {
  my $id = shift;
  my @t = map { unhex($_) } @_;
  my $cwd = shift @t;
  my @env = splice(@t, 0, shift @t);
  my @read = splice(@t, 0, shift @t);
  my @paths = splice(@t, 0, shift @t);
  die "no supervisor arguments\n" unless @t >= 2;
  my @fds;
  for my $file (@read) {
    sysopen(my $f, $file, O_RDONLY) or die "$file: $!\n";
    push @fds, $f;
  }
  push @fds, openWithoutSymlinks($_) for @paths;
  my $namespace = baseFor(\@t);
  pipe(my $ready, my $named) or die "pipe: $!\n";
  my $pid = fork;
  die "fork: $!\n" unless defined $pid;
  becomeSupervisor($cwd, \@env, \@fds, \@t, $ready, $named, $namespace) if $pid == 0;
  close($named);
  # End of file once the child took the supervisor's name.
  $naming{ fileno($ready) } = [$ready, $id, $pid, ++$requests];
}

closeInherited();
my $buffer = '';
for (;;) {
  my $wanted = '';
  vec($wanted, fileno(STDIN), 1) = 1;
  vec($wanted, fileno($wake), 1) = 1;
  vec($wanted, $_, 1) = 1 for keys %naming;
  next if select(my $ready = $wanted, undef, undef, undef) <= 0;
  named($_) for sort { $naming{$a}[3] <=> $naming{$b}[3] } grep { vec($ready, $_, 1) } keys %naming;
  if (vec($ready, fileno($wake), 1)) {
    sysread($wake, my $bytes, 4096);
    while ((my $pid = waitpid(-1, POSIX::WNOHANG())) > 0) {
      # Its `pid` first: ucompute knows a supervisor's end only by a pid it was told.
      my ($fd) = grep { $naming{$_}[2] == $pid } keys %naming;
      named($fd) if defined $fd;
      answer('exited', $pid);
    }
  }
  next unless vec($ready, fileno(STDIN), 1);
  my $got = sysread(STDIN, $buffer, 65536, length $buffer);
  next if !defined $got && $!{EINTR};
  last unless $got;
  while ($buffer =~ s/^([^\n]*)\n//) {
    my ($id, @fields) = split / /, $1;
    eval { start($id, @fields); 1 } or answer('error', $id, unpack('H*', $@ =~ s/\n\z//r));
  }
}
