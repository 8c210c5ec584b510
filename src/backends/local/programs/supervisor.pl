#!/usr/bin/perl -w
# The supervisor of one container (see supervisor.ts, which starts it): joins the pod's cgroups,
# runs the command as its child, copies its stdout and stderr to rotated files, and records how
# it ended in the state folder once the output is written.
#
# Run as a program (`perl supervisor.pl ARGUMENTS`), or loaded once by supervisor-launcher.pl,
# which forks and calls supervise(ARGUMENTS) for each container: a fork of a Perl that has
# compiled this file costs a fraction of a millisecond, a new Perl several.
#
# Arguments: its name (ucompute-supervisor, which marks the process as a supervisor), the state
# folder, `:`-separated cgroup.procs files, stdout file, stderr file, rotation size, files kept,
# network namespace file or '', `uid:gid` or '', the numbers of setns, unshare, mount and umount2
# (`:`-separated; '' without a network namespace) and of setgroups (or ''),
# bubblewrap's status file or '' (see sandbox-status.ts), the prepared mounts (`:`-separated
# `SOURCE,TARGET` in hex; see prepareMounts), then the command. No module besides strict is loaded: it starts in about a millisecond.
package UcomputeSupervisor;
use strict;

# Exit statuses it records itself: 125 when it cannot join the pod's cgroups (CGROUP_JOIN_FAILED
# in supervisor.ts); 126 when the child cannot become what the container runs as, 127 when the
# command is not found.
my $CGROUP_JOIN_FAILED = 125;
# setns's nstype for a network namespace (CLONE_NEWNET in <sched.h>, the same on every architecture).
my $CLONE_NEWNET = 0x40000000;
# unshare's flag for a new mount namespace, and mount's flags (<sys/mount.h>), umount2's MNT_DETACH.
my ($CLONE_NEWNS, $MS_REC, $MS_SLAVE, $MNT_DETACH) = (0x00020000, 0x4000, 0x80000, 2);

# One container's arguments (see above), set by supervise.
my ($state, $cgroups, $out, $err, $max, $keep, $netns, $ids, $nsCalls, $setgroups, $sandboxStatus, $prepared, @command);
my ($setns, $unshare, $mount, $umount2);

sub put {
  my ($file, $text) = @_;
  open(my $f, '>', $file) or return 0;
  print $f $text;
  close($f);
}

sub refuse {
  print STDERR "ucompute-supervisor: $_[0]\n";
  exit 126;
}

# Shifts `f` -> `f.1` -> ..., the oldest dropped.
sub rotate {
  my $file = shift;
  for (my $i = $keep - 1; $i > 1; $i--) {
    rename("$file." . ($i - 1), "$file.$i") if -e "$file." . ($i - 1);
  }
  rename($file, "$file.1");
}

# A new file for a stream (a non-empty one left by an earlier run of the container is rotated
# first); a stream whose file cannot be written is closed, so its writer gets EPIPE rather than
# filling the disk elsewhere.
sub begin {
  my $s = shift;
  rotate($s->{path}) if -s $s->{path};
  $s->{size} = 0;
  # 0600 (ucompute's alone); the umask the command inherits is left as it was.
  my $umask = umask(077);
  my $opened = open($s->{file}, '>', $s->{path});
  umask($umask);
  return 1 if $opened;
  close($s->{pipe});
  $s->{pipe} = undef;
  return 0;
}

# The launcher's namespace without the host's /run/netns mounts (see supervisor-launcher.pl), open
# here when it made one; close-on-exec.
my $baseNamespace;
sub joinOnStart { $baseNamespace = shift }

# mount's flags (<sys/mount.h>), and those of the per-mount options of /proc/self/mountinfo.
my ($MS_RDONLY, $MS_NOSUID, $MS_NODEV, $MS_REMOUNT, $MS_BIND) = (1, 2, 4, 32, 4096);
my %MOUNT_FLAGS = (ro => 1, nosuid => 2, nodev => 4, noexec => 8, noatime => 1024, nodiratime => 2048,
  relatime => 1 << 21, strictatime => 1 << 24);

# The per-mount flags of the topmost mount at each mount point, from /proc/self/mountinfo.
sub mountFlags {
  open(my $info, '<', '/proc/self/mountinfo') or return undef;
  my %flags;
  while (my $line = <$info>) {
    my @fields = split / /, $line;
    my $point = $fields[4] =~ s/\\([0-7]{3})/chr(oct($1))/ger;
    my $flags = 0;
    $flags |= $MOUNT_FLAGS{$_} // 0 for split /,/, $fields[5];
    $flags{$point} = $flags;
  }
  close($info);
  return \%flags;
}

# The `SOURCE,TARGET` pairs (hex) of the prepared-mounts argument.
sub preparedPairs { map { [map { pack('H*', $_) } split /,/] } split /:/, shift }

# Makes the mounts every container of the runtime binds alike (its view of /usr, the /etc copy,
# /sys with the topology in it, the cgroup hierarchies its views come from) read-only, nosuid and
# nodev where bubblewrap starts: a bind of them is then what bubblewrap's read-only bind makes,
# with no remount (bubblewrap remounts only a mount that lacks one of those flags), and the
# topology is bound into /sys here once, not by each container (issue 18: every mount call waits
# for the kernel's one lock of mount namespaces). A target that is already a mount point of its
# own source is changed in place; any other is bound first (recursively, in the given order).
# Only in a mount namespace that is not the host's. Dies naming the step that failed.
sub prepareMounts {
  my ($mount, @pairs) = @_;
  return unless @pairs;
  my $before = mountFlags() or die "/proc/self/mountinfo: $!\n";
  my $none = 'none';
  for (@pairs) {
    my ($source, $target) = @$_;
    next if $source eq $target && exists $before->{$target};
    syscall($mount, $source, $target, 0, $MS_BIND | $MS_REC, 0) == 0 or die "binding $source at $target: $!\n";
  }
  my $after = mountFlags() or die "/proc/self/mountinfo: $!\n";
  for my $target (map { $_->[1] } @pairs) {
    my $flags = $after->{$target} // die "$target is not a mount point once bound\n";
    my $wanted = $flags | $MS_RDONLY | $MS_NOSUID | $MS_NODEV;
    next if $wanted == $flags;
    syscall($mount, $none, $target, 0, $MS_REMOUNT | $MS_BIND | $wanted, 0) == 0 or die "remounting $target: $!\n";
  }
}

# bubblewrap copies the whole mount table it starts in and reads it for each of its binds, and the
# host's holds a mount per pod's network namespace under /run/netns (every pod of the machine): the
# child joins the launcher's namespace without them or, without one, drops them in a mount
# namespace of its own, made a slave first so that nothing unmounted here leaves the host's, before
# it execs bubblewrap. Dropping them only saves a cost: if a step fails, the child goes on as it is,
# unless it has prepared mounts to make (bubblewrap's arguments then count on them): it refuses.
sub detachNamespaceMounts {
  return if $baseNamespace && syscall($setns, fileno($baseNamespace), $CLONE_NEWNS) == 0;
  my @pairs = preparedPairs($prepared);
  my ($none, $root) = ('none', '/');
  unless (syscall($unshare, $CLONE_NEWNS) == 0 && syscall($mount, $none, $root, 0, $MS_REC | $MS_SLAVE, 0) == 0) {
    refuse("no mount namespace for the prepared mounts: $!") if @pairs;
    return;
  }
  my $folder = '/run/netns';
  syscall($umount2, $folder, $MNT_DETACH);
  eval { prepareMounts($mount, @pairs); 1 } or refuse("could not prepare the read-only mounts: $@" =~ s/\n\z//r);
}

# Supervises one container; returns once its end is recorded.
sub supervise {
  # A caught signal (unlike an ignored one) is reset for the child: SIGTERM reaches the command
  # while the supervisor stays to record how it ended.
  $SIG{$_} = sub { } for qw(TERM INT HUP);
  (undef, $state, $cgroups, $out, $err, $max, $keep, $netns, $ids, $nsCalls, $setgroups, $sandboxStatus, $prepared, @command) = @_;
  ($setns, $unshare, $mount, $umount2) = split /:/, $nsCalls;
  put("$state/pid", "$$\n");
  my $status = 0;
  for (split /:/, $cgroups) { put($_, "$$\n") or $status = $CGROUP_JOIN_FAILED }
  if ($status == 0) {
    pipe(my $outRead, my $outWrite) and pipe(my $errRead, my $errWrite) or die "pipe: $!";
    my $child = fork;
    die "fork: $!" unless defined $child;
    if ($child == 0) {
      open(STDOUT, '>&', $outWrite) and open(STDERR, '>&', $errWrite) or exit 126;
      # Opened before anything can fail, so that a status without an exit code means the sandbox
      # never ran the command; kept in scope until exec (leaving the block would close it).
      my $sandbox;
      if ($sandboxStatus ne '') {
        open($sandbox, '>', $sandboxStatus) or refuse("$sandboxStatus: $!");
        my $F_SETFD = 2;
        fcntl($sandbox, $F_SETFD, 0) or refuse("fcntl: $!");    # no close-on-exec: bubblewrap writes it
        splice(@command, 1, 0, '--json-status-fd', fileno($sandbox));
      }
      if ($netns ne '') {
        open(my $ns, '<', $netns) or refuse("$netns: $!");
        syscall($setns, fileno($ns), $CLONE_NEWNET) == 0 or refuse("setns $netns: $!");
        detachNamespaceMounts();
      }
      if ($ids ne '') {
        my ($uid, $gid) = split /:/, $ids;
        syscall($setgroups, 0, 0) == 0 or refuse("setgroups: $!");
        $) = $gid;
        $( = $gid;
        ($<, $>) = ($uid, $uid);
        my $became = join(':', $<, $>, $(, $));
        refuse("could not become $ids ($became)") unless $became eq "$uid:$uid:$gid:$gid";
      }
      # Its own message below, not Perl's warning, when the command cannot be run.
      { local $^W = 0; exec { $command[0] } @command }
      print STDERR "$command[0]: $!\n";
      exit($! == 2 ? 127 : 126);
    }
    close($outWrite);
    close($errWrite);
    close($baseNamespace) if $baseNamespace;
    # Each stream is copied as it comes (long lines and binary output pass untouched) until every
    # holder of its pipe closed it.
    my @streams = ({ pipe => $outRead, path => $out }, { pipe => $errRead, path => $err });
    begin($_) for @streams;
    while (my @open = grep { $_->{pipe} } @streams) {
      my $wanted = '';
      vec($wanted, fileno($_->{pipe}), 1) = 1 for @open;
      next if select(my $ready = $wanted, undef, undef, undef) <= 0;
      for my $s (grep { vec($ready, fileno($_->{pipe}), 1) } @open) {
        my $got = sysread($s->{pipe}, my $bytes, 65536);
        next unless defined $got;
        if ($got == 0) { close($s->{pipe}); $s->{pipe} = undef; close($s->{file}); next }
        while ($s->{pipe} && length $bytes) {
          my $part = substr($bytes, 0, $max - $s->{size}, '');
          for (my $at = 0; $at < length $part;) {
            my $wrote = syswrite($s->{file}, $part, length($part) - $at, $at);
            if (!defined $wrote) { close($s->{pipe}); $s->{pipe} = undef; last }
            $at += $wrote;
          }
          $s->{size} += length $part;
          if ($s->{pipe} && $s->{size} >= $max) { close($s->{file}); begin($s) }
        }
      }
    }
    1 while waitpid($child, 0) < 0 && $! == 4;
    $status = $? & 127 ? 128 + ($? & 127) : $? >> 8;
  }
  put("$state/exit", "$status\n");
}

supervise(@ARGV) unless caller;
1;
