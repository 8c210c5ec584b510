/**
 * The supervisor: one process per container, started detached by the launcher, that outlives
 * ucompute. It joins the pod's cgroups before anything of the container runs, runs the command as
 * its child, writes the child's stdout and stderr to their files with rotation, and records the
 * exit status in the state folder once the output is written: the status survives a ucompute
 * restart, and a reader that sees it finds the whole output.
 *
 * It is a Perl script (see perl.ts): one Perl process does what took eight processes and two more
 * programs before bubblewrap in sh (the shell, mkfifo, a subshell, `head` and `wc` per stream;
 * nsenter and setpriv).
 */

import { CLONE_NEWNET, PERL, syscallNumber } from './perl.ts';

/** In every supervisor's command line: a recorded pid is a supervisor only while this is there. */
export const SUPERVISOR_NAME = 'ucompute-supervisor';
/** Exit status recorded when the supervisor could not put itself into the pod's cgroups. */
export const CGROUP_JOIN_FAILED = 125;

export interface SupervisedCommand {
  /** The container's state folder: `pid` and `exit` are written there. */
  stateDir: string;
  /** The pod's `cgroup.procs` files. */
  cgroupProcs: readonly string[];
  stdout: string;
  stderr: string;
  /** The pod's network namespace, joined before the command starts; null: the host's network. */
  netns: string | null;
  /** Host ids the command starts as, without supplementary groups; null: the supervisor's. */
  hostIds: { uid: number; gid: number } | null;
  /**
   * Where bubblewrap (the command) writes its JSON status (see sandbox-status.ts): the child opens
   * it first and hands it over as `--json-status-fd`. Null: the command is not bubblewrap.
   */
  sandboxStatus: string | null;
  /** A file is rotated once it holds `maxSizeBytes`; `maxFiles` are kept per stream (at least 2). */
  logs: { maxSizeBytes: number; maxFiles: number };
  argv: readonly string[];
}

/**
 * Arguments: state folder, `:`-separated cgroup.procs files, stdout file, stderr file, rotation
 * size, files kept, network namespace file or '', `uid:gid` or '', the numbers of setns and
 * setgroups, bubblewrap's status file or '', command. The
 * child joins the namespace and becomes the ids before it runs the command, and checks it did; a
 * failure is told on the container's stderr with status 126. A caught signal (unlike an ignored one) is reset for the child, so
 * SIGTERM reaches the command while the supervisor stays to record how it ended. Each stream is
 * copied as it comes (long lines and binary output pass untouched); a file that reaches the size
 * shifts (`f` -> `f.1` -> …, the oldest dropped) and a new one starts, as does a non-empty file
 * left by an earlier run of the container. A stream whose file cannot be written is closed, so its
 * writer gets EPIPE rather than filling the disk elsewhere. The files live in ucompute's own state
 * folder (0700), which no container sees, so nothing a job plants is followed. The output ends when
 * every holder of the pipes closed them (bubblewrap's --die-with-parent ends whatever the command
 * left behind; unsandboxed, a daemon that keeps the output open keeps the container running).
 * No module is loaded: the script starts in about a millisecond.
 */
const SCRIPT = `
$SIG{$_} = sub {} for qw(TERM INT HUP);
my (undef, $state, $cgroups, $out, $err, $max, $keep, $netns, $ids, $setns, $setgroups, $sandboxStatus, @command) = @ARGV;
sub put { my ($file, $text) = @_; open(my $f, '>', $file) or return 0; print $f $text; close($f) }
put("$state/pid", "$$\\n");
my $status = 0;
for (split /:/, $cgroups) { put($_, "$$\\n") or $status = ${CGROUP_JOIN_FAILED} }
sub refuse { print STDERR "ucompute-supervisor: $_[0]\\n"; exit 126 }
sub rotate {
  my $file = shift;
  for (my $i = $keep - 1; $i > 1; $i--) { rename("$file." . ($i - 1), "$file.$i") if -e "$file." . ($i - 1) }
  rename($file, "$file.1");
}
sub begin {
  my $s = shift;
  rotate($s->{path}) if -s $s->{path};
  $s->{size} = 0;
  return 1 if open($s->{file}, '>', $s->{path});
  close($s->{pipe}); $s->{pipe} = undef; 0;
}
if ($status == 0) {
  pipe(my $outRead, my $outWrite) and pipe(my $errRead, my $errWrite) or die "pipe: $!";
  my $child = fork;
  die "fork: $!" unless defined $child;
  if ($child == 0) {
    open(STDOUT, '>&', $outWrite) and open(STDERR, '>&', $errWrite) or exit 126;
    # Opened before anything can fail, so that a status without an exit code means the sandbox
    # never ran the command; kept in scope until exec (leaving it would close it).
    my $status;
    if ($sandboxStatus ne '') {
      open($status, '>', $sandboxStatus) or refuse("$sandboxStatus: $!");
      fcntl($status, 2, 0) or refuse("fcntl: $!");  # F_SETFD: no close-on-exec
      splice(@command, 1, 0, '--json-status-fd', fileno($status));
    }
    if ($netns ne '') {
      open(my $ns, '<', $netns) or refuse("$netns: $!");
      syscall($setns, fileno($ns), ${CLONE_NEWNET}) == 0 or refuse("setns $netns: $!");
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
    exec { $command[0] } @command;
    print STDERR "$command[0]: $!\\n";
    exit($! == 2 ? 127 : 126);
  }
  close($outWrite); close($errWrite);
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
put("$state/exit", "$status\\n");
`;

/** The supervisor's program and arguments for a container's command. */
export function supervisorCommand(command: SupervisedCommand): { file: string; args: string[] } {
  const args = [
    '-e',
    SCRIPT,
    '--',
    SUPERVISOR_NAME,
    command.stateDir,
    command.cgroupProcs.join(':'),
    command.stdout,
    command.stderr,
    String(command.logs.maxSizeBytes),
    String(command.logs.maxFiles),
    command.netns ?? '',
    command.hostIds ? `${command.hostIds.uid}:${command.hostIds.gid}` : '',
    command.netns ? String(syscallNumber('setns')) : '',
    command.hostIds ? String(syscallNumber('setgroups')) : '',
    command.sandboxStatus ?? '',
    ...command.argv,
  ];
  return { file: PERL, args };
}
