#!/usr/bin/perl -w
# Attaches at TARGET a read-only copy of the mount tree at SOURCE whose file ids are seen through
# the user namespace open at USERNS (an idmapped mount, Linux 5.12+): a file of uid U shows as the
# host id that U maps to there. Run by root: perl idmapped-mount.pl USERNS SOURCE TARGET.
# The new mount API's system calls have the same numbers on every architecture.
use strict;

my ($userns, $source, $target) = @ARGV;
die "usage: idmapped-mount.pl USERNS SOURCE TARGET\n" unless defined $target;
my ($OPEN_TREE, $MOVE_MOUNT, $MOUNT_SETATTR) = (428, 429, 442);
my $AT_FDCWD = -100;
my ($OPEN_TREE_CLONE, $OPEN_TREE_CLOEXEC, $AT_RECURSIVE, $AT_EMPTY_PATH) = (0x1, 0x80000, 0x8000, 0x1000);
my ($MOUNT_ATTR_RDONLY, $MOUNT_ATTR_IDMAP) = (0x1, 0x100000);
my $MOVE_MOUNT_F_EMPTY_PATH = 0x4;

open(my $ns, '<', $userns) or die "$userns: $!\n";
my $tree = syscall($OPEN_TREE, $AT_FDCWD, $source, $OPEN_TREE_CLONE | $OPEN_TREE_CLOEXEC | $AT_RECURSIVE);
die "open_tree $source: $!\n" if $tree < 0;
# struct mount_attr { u64 attr_set, attr_clr, propagation, userns_fd; }
my $attr = pack('QQQQ', $MOUNT_ATTR_IDMAP | $MOUNT_ATTR_RDONLY, 0, 0, fileno($ns));
# syscall passes a string as a pointer to its bytes, and a literal cannot be written to: a variable.
my $here = '';
syscall($MOUNT_SETATTR, $tree, $here, $AT_EMPTY_PATH, $attr, length $attr) == 0
  or die "mount_setattr $source: $!\n";
syscall($MOVE_MOUNT, $tree, $here, $AT_FDCWD, $target, $MOVE_MOUNT_F_EMPTY_PATH) == 0
  or die "move_mount $target: $!\n";
