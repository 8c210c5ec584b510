import { closeSync, readdirSync, readFileSync } from 'node:fs';

const O_CLOEXEC = 0o2000000;

/**
 * Closes the descriptors above 2 that this process inherited open across exec: those without
 * close-on-exec (Node and libuv open all of their own with it). Whatever ucompute's parent left
 * open would otherwise reach every process started from here, containers included: neither
 * spawn, forkpty nor bubblewrap closes descriptors it was not told about.
 */
export function closeInheritedDescriptors(): void {
  for (const name of readdirSync('/proc/self/fd')) {
    const fd = Number(name);
    if (fd <= 2) continue;
    let flags: number;
    try {
      flags = Number.parseInt(
        /^flags:\s*([0-7]+)$/m.exec(readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8'))![1]!,
        8,
      );
    } catch {
      continue; // The listing's own descriptor, closed since.
    }
    if ((flags & O_CLOEXEC) === 0) closeSync(fd);
  }
}
