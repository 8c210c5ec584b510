/**
 * Which of a container's variables may pass through the root processes before bubblewrap (the
 * supervisor, a shell's sh, nsenter and setpriv) as their environment, and which only as
 * bubblewrap's arguments.
 */

/** The host's programs' PATH, for the processes ucompute runs before a container's own. */
export const HOST_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/**
 * Variables that change how the root processes before bubblewrap behave: the dynamic loader's and
 * libc's, locales, Perl's (PERL5OPT and PERL5LIB load code into the supervisor), the shell's own.
 * A container's value for them reaches it through bubblewrap's arguments, never through those
 * processes' environment.
 */
const ROOT_SENSITIVE =
  /^(LD_.*|PERL.*|GCONV_PATH|GETCONF_DIR|GLIBC_TUNABLES|MALLOC_.*|LOCPATH|NLSPATH|LC_.*|LANG|LANGUAGE|HOSTALIASES|LOCALDOMAIN|RES_OPTIONS|RESOLV_.*|NIS_PATH|TZ|TZDIR|TMPDIR|PATH|PWD|OLDPWD|IFS|ENV|BASH_ENV|PS4|CDPATH|SHELLOPTS|POSIXLY_CORRECT)$/;
/** What the shell passes on to the programs it runs: valid shell names only. */
const SHELL_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Whether the variable may be in a root process's environment (a name a shell keeps, harmless to root's programs). */
export const safeForRoot = (name: string): boolean => SHELL_NAME.test(name) && !ROOT_SENSITIVE.test(name);

/** What a shell into a container gets of its variables: those safe for root, and its PATH. */
export const passedToShell = (name: string): boolean =>
  SHELL_NAME.test(name) && (!ROOT_SENSITIVE.test(name) || name === 'PATH');
